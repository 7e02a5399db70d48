"""The error a topic-admin request answers when writing znodes fails."""
from kazoo.exceptions import ConnectionLoss, NoAuthError, SessionExpiredError

from odradek.broker.apis.context import admin_error
from odradek.protocol.errors import ErrorCode, KafkaError


def test_kafka_errors_keep_their_code_and_message():
    assert admin_error(KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")) == (
        ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 't' already exists.")


def test_a_lost_zookeeper_session_is_not_controller_so_clients_retry_elsewhere():
    for exc in (SessionExpiredError(), ConnectionLoss()):
        code, message = admin_error(exc)
        assert code == ErrorCode.NOT_CONTROLLER and code.retriable
        assert type(exc).__name__ in message


def test_anything_else_is_unknown_server_error():
    assert admin_error(NoAuthError())[0] == ErrorCode.UNKNOWN_SERVER_ERROR
    assert admin_error(RuntimeError("boom")) == (ErrorCode.UNKNOWN_SERVER_ERROR, "boom")
