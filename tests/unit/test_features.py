"""Feature versioning (KIP-584) as Kafka 2.8 has it: the feature cache, ApiVersions v3's fields,
UpdateFeatures' rules and messages, the IBP switch."""
from __future__ import annotations

import pytest

from odradek.broker.apis import api_versions, update_features
from odradek.broker.apis.update_features import judge
from odradek.broker.features import FinalizedFeatures, alter_isr_enabled, feature_versioning_enabled
from odradek.protocol.errors import ErrorCode
from odradek.protocol.schema import Struct
from odradek.zk.znodes import FeatureZNode

from broker_fixtures import Broker, call


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.close()


def test_the_znode_is_kafkas_json():
    data = FeatureZNode.encode(FeatureZNode.ENABLED, {"f": (1, 3)})
    assert data == b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":3}}}'
    assert FeatureZNode.decode(data) == (1, {"f": (1, 3)})
    assert FeatureZNode.decode(b'{"version":1,"status":0,"features":{}}') == (0, {})


def test_the_cache_follows_the_znode_and_api_versions_answers_it(broker):
    av = call(broker, api_versions, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert (av.finalized_features_epoch, list(av.supported_features), list(av.finalized_features)) == (-1, [], [])
    cache: FinalizedFeatures = broker.ctx.features
    cache.update((FeatureZNode.ENABLED, {"f": (1, 2)}, 4))
    av = call(broker, api_versions, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert av.finalized_features_epoch == 4
    assert [(f.name, f.min_version_level, f.max_version_level) for f in av.finalized_features] == [("f", 1, 2)]
    cache.update((FeatureZNode.ENABLED, {}, 3))      # an older read never replaces a newer one
    assert cache.epoch == 4
    cache.update((FeatureZNode.DISABLED, {"f": (1, 2)}, 5))
    assert (cache.epoch, cache.features) == (-1, {})
    cache.update(None)
    assert cache.epoch == -1


@pytest.mark.parametrize("ibp,enabled", [("2.8-IV1", True), ("2.7-IV0", True), ("2.7", True), ("3.0", True),
                                         ("2.6-IV0", False), ("0.10.2", False), ("2.6", False)])
def test_feature_versioning_from_ibp_2_7(ibp, enabled):
    assert feature_versioning_enabled(ibp) is enabled


@pytest.mark.parametrize("ibp,enabled", [("2.8-IV1", True), ("2.7-IV2", True), ("2.7", True), ("2.7.1", True),
                                         ("3.0", True), ("2.7-IV1", False), ("2.7-IV0", False), ("2.6", False)])
def test_leaders_send_alter_isr_from_ibp_2_7_iv2(ibp, enabled):
    assert alter_isr_enabled(ibp) is enabled


def update(name: str, level: int, downgrade: bool = False) -> Struct:
    return Struct(feature=name, max_version_level=level, allow_downgrade=downgrade)


def test_kafkas_rules_for_an_update():
    assert judge(update("", 1), None) == "Feature name can not be empty."
    assert judge(update("f", 0, True), None) == "Can not delete non-existing finalized feature."
    assert judge(update("f", 0, True), (1, 2)) is None          # deleting an existing one is valid
    assert judge(update("f", -1), (1, 2)).startswith("Can not provide maxVersionLevel: -1 less than 1")
    assert judge(update("f", 2), (1, 2)) == ("Can not upgrade a finalized feature from existing "
                                            "maxVersionLevel:2 to the same value.")
    assert judge(update("f", 1), (1, 2)).startswith("Can not downgrade finalized feature from existing")
    assert judge(update("f", 3, True), (1, 2)).startswith("When the allowDowngrade flag set in the request")
    assert judge(update("f", 3), None) == ("Could not apply finalized feature update because the provided "
                                          "feature is not supported.")


def test_only_the_controller_answers(broker):
    resp = call(broker, update_features, 0, {"timeout_ms": 100, "feature_updates": [
        {"feature": "f", "max_version_level": 1, "allow_downgrade": False}]})
    assert (resp.error_code, list(resp.results)) == (ErrorCode.NOT_CONTROLLER, [])
