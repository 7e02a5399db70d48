"""``odradek configs`` argument parsing and checks (kafka-configs.sh's), without a cluster."""
import pytest

from odradek.zk import configs_cli as cli
from odradek.zk.cli import CommandError
from odradek.zk.cli import main as odradek_main


def parse(*argv):
    return cli.check_args(cli.build_parser().parse_args(list(argv)))


def test_add_config_keeps_bracketed_commas_and_drops_the_brackets():
    assert cli.parse_add_config("SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
                                "SCRAM-SHA-512=[password=alice-secret]") == {
        "SCRAM-SHA-256": "iterations=8192,password=alice-secret", "SCRAM-SHA-512": "password=alice-secret"}
    assert cli.parse_add_config("retention.ms=1000, cleanup.policy=[compact,delete]") == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete"}
    assert cli.parse_add_config("ssl.endpoint.identification.algorithm=") == {
        "ssl.endpoint.identification.algorithm": ""}


def test_add_config_without_a_value_is_refused():
    with pytest.raises(CommandError, match='must be in the format "key=val"'):
        cli.parse_add_config("retention.ms")


def test_scram_specs_are_taken_out_of_the_plain_configs():
    r = parse("--zookeeper", "zk:2181", "--alter", "--entity-type", "users", "--entity-name", "alice",
              "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],producer_byte_rate=1024")
    assert (r.action, r.entity_type, r.entity_name, r.zookeeper) == ("alter", "users", "alice", "zk:2181")
    assert r.scram == {"SCRAM-SHA-256": (8192, "alice-secret")}
    assert r.to_add == {"producer_byte_rate": "1024"}
    assert "alice-secret" not in repr(r)


def test_delete_config_takes_comma_lists_and_repeats():
    r = parse("--alter", "--user", "alice", "--delete-config", "SCRAM-SHA-512,producer_byte_rate",
              "--delete-config", "SCRAM-SHA-256")
    assert r.to_delete == ["SCRAM-SHA-512", "producer_byte_rate", "SCRAM-SHA-256"]
    assert (r.entity_type, r.entity_name) == ("users", "alice")


def test_entity_default_and_shorthands():
    assert parse("--describe", "--entity-type", "brokers", "--entity-default").entity_name == ""
    assert parse("--describe", "--broker-defaults").entity_name == ""
    assert parse("--describe", "--entity-type", "topics").entity_name is None
    r = parse("--describe", "--bootstrap-server", "b:9092", "--command-config", "c.properties", "--user", "bob")
    assert (r.bootstrap_server, r.command_config, r.entity_name) == ("b:9092", "c.properties", "bob")


def test_a_user_and_client_entity_in_either_order():
    r = parse("--alter", "--entity-type", "clients", "--entity-name", "c", "--entity-type", "users",
              "--entity-default", "--add-config", "producer_byte_rate=10")
    assert (r.entity_type, r.entity_name, r.with_clients, r.client_name) == ("users", "", True, "c")
    assert r.entity_names() == ["", "c"] and r.to_add == {"producer_byte_rate": "10"}
    r = parse("--describe", "--entity-type", "users", "--entity-name", "u", "--entity-type", "clients")
    assert (r.entity_name, r.with_clients, r.client_name) == ("u", True, None)
    assert cli.quota_label("a%20b", "<default>") == "user-principal 'a b', default client-id"


@pytest.mark.parametrize("argv, fragment", [
    ((), "exactly one action: --describe, --alter"),
    (("--describe", "--alter", "--user", "a"), "exactly one action"),
    (("--describe",), "At least one entity type must be specified"),
    (("--describe", "--entity-type", "groups"), "Invalid entity type groups"),
    (("--describe", "--entity-type", "users", "--entity-type", "users"), "Duplicate entity type(s) specified: users"),
    (("--describe", "--entity-type", "users", "--user", "a"), "should not be used in conjunction"),
    (("--alter", "--entity-type", "topics", "--add-config", "a=b"), "an entity name must be specified with --alter of topics"),
    (("--alter", "--entity-type", "users", "--add-config", "a=b"), "an entity-name or default entity must be specified"),
    (("--alter", "--user", "a"), "At least one of --add-config, --add-config-file, or --delete-config"),
    (("--describe", "--user", "a", "--add-config", "a=b"), 'Option "[describe]" can\'t be used with option "[add-config]"'),
    (("--describe", "--user", "a", "--zookeeper", "z:1", "--bootstrap-server", "b:1"), "Only one of --bootstrap-server or --zookeeper"),
    (("--describe", "--user", "a", "--command-config", "f"), "--command-config can only be used with --bootstrap-server"),
    (("--describe", "--user", "a", "--all"), "--bootstrap-server must be specified for --all"),
    (("--describe", "--broker", "one"), "must be a valid integer broker id, but it is: one"),
    (("--alter", "--user", "a", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"),
     "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"),
    (("--alter", "--user", "a", "--add-config", "SCRAM-SHA-256=[iterations=8192,pass=hunter2]"),
     "Invalid credential property SCRAM-SHA-256"),
    (("--describe", "--entity-type", "users", "--entity-type", "topics"),
     "Only the entity types users and clients can be combined"),
    (("--alter", "--entity-type", "users", "--entity-name", "u", "--entity-type", "clients", "--add-config", "a=b"),
     "--entity-name or --entity-default must be specified with each --entity-type for --alter"),
    (("--alter", "--entity-type", "users", "--entity-name", "u", "--entity-type", "clients", "--entity-name", "c",
      "--add-config", "SCRAM-SHA-256=[password=x]"), "not to a <user, client-id> entity"),
    (("--describe", "--no-such-flag"), "unrecognized arguments"),
])
def test_bad_arguments_are_one_clear_line(argv, fragment, capsys):
    with pytest.raises(CommandError) as info:
        parse(*argv)
    assert fragment in str(info.value)
    assert "hunter2" not in str(info.value)
    # through the console script: one "Error: ..." line on stderr, exit code 1
    assert odradek_main(["configs", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("Error: ") and fragment in err[0]


def test_entity_labels_are_kafkas():
    assert cli.entity_label("users", "a%20b") == "user-principal 'a b'"
    assert cli.entity_label("users", "<default>") == "default user-principal"
    assert cli.entity_label("topics", "orders") == "topic 'orders'"
    assert cli.entity_label("brokers", "1") == "brokers '1'"
    assert cli.entity_label("clients", "<default>") == "default client-id"
