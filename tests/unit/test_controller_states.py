"""Partition and replica state transition tables."""
import pytest

from odradek.broker.controller.states import (IllegalStateTransition, PARTITION_TRANSITIONS,
                                              PartitionState as P, REPLICA_TRANSITIONS,
                                              ReplicaState as R)

LEGAL_P = {(P.NON_EXISTENT, P.NEW), (P.NEW, P.ONLINE), (P.NEW, P.OFFLINE), (P.ONLINE, P.ONLINE),
           (P.ONLINE, P.OFFLINE), (P.OFFLINE, P.ONLINE), (P.OFFLINE, P.OFFLINE),
           (P.OFFLINE, P.NON_EXISTENT)}

LEGAL_R = {(R.NON_EXISTENT, R.NEW), (R.NEW, R.ONLINE), (R.NEW, R.OFFLINE), (R.ONLINE, R.ONLINE),
           (R.ONLINE, R.OFFLINE), (R.OFFLINE, R.ONLINE), (R.OFFLINE, R.OFFLINE),
           (R.OFFLINE, R.DELETION_STARTED), (R.OFFLINE, R.DELETION_INELIGIBLE),
           (R.DELETION_STARTED, R.DELETION_SUCCESSFUL), (R.DELETION_STARTED, R.DELETION_INELIGIBLE),
           (R.DELETION_SUCCESSFUL, R.NON_EXISTENT), (R.DELETION_INELIGIBLE, R.ONLINE),
           (R.DELETION_INELIGIBLE, R.OFFLINE)}


@pytest.mark.parametrize("src", list(P))
@pytest.mark.parametrize("dst", list(P))
def test_partition_table(src, dst):
    if (src, dst) in LEGAL_P:
        assert src.transition_to(dst) is dst
    else:
        with pytest.raises(IllegalStateTransition):
            src.transition_to(dst)


@pytest.mark.parametrize("src", list(R))
@pytest.mark.parametrize("dst", list(R))
def test_replica_table(src, dst):
    if (src, dst) in LEGAL_R:
        assert src.transition_to(dst) is dst
    else:
        with pytest.raises(IllegalStateTransition):
            src.transition_to(dst)


def test_tables_cover_every_state():
    assert set(PARTITION_TRANSITIONS) == set(P)
    assert set(REPLICA_TRANSITIONS) == set(R)
    assert P.ONLINE.value == "OnlinePartition" and R.DELETION_STARTED.value == "ReplicaDeletionStarted"
