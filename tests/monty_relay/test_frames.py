"""Monty's frames as the relay checks them (service/monty_relay/frames.py), without a worker or a socket."""

from __future__ import annotations

import pytest

from service.errors import MalformedFrame
from service.monty_relay import monty_pb2 as pb
from service.monty_relay.frames import FrameCaps, event, request
from service.monty_relay.policy import FunctionPolicy
from service.tools.policy import ToolPolicy

CAPS = FrameCaps(
    max_frame_bytes=1024,
    max_values=8,
    memory_bytes=64 << 20,
    max_memory_bytes=1 << 30,
    duration_micros=10_000_000,
    max_duration_micros=60_000_000,
    max_recursion_depth=500,
)


def configure(**limits: int) -> bytes:
    return pb.ParentRequest(configure=pb.Configure(limits=pb.ResourceLimits(**limits))).SerializeToString()


def test_configure_limits_are_clamped_and_absent_ones_get_the_servers_defaults():
    asked = request(
        configure(max_memory_bytes=1 << 40, max_recursion_depth=10**6, max_feed_duration_micros=10**12), CAPS
    )
    limits = pb.ParentRequest.FromString(asked.data).configure.limits
    assert limits.max_memory_bytes == 1 << 30
    assert limits.max_recursion_depth == 500
    assert limits.max_feed_duration_micros == 60_000_000
    assert limits.max_turn_duration_micros == 10_000_000  # absent: the default, never Monty's "unlimited"
    assert asked.turn_micros == 60_000_000
    modest = pb.ParentRequest.FromString(request(configure(max_memory_bytes=1 << 20), CAPS).data).configure
    assert modest.limits.max_memory_bytes == 1 << 20
    assert modest.persistence == pb.PERSISTENCE_EPHEMERAL


def test_a_frame_is_measured_before_it_is_decoded():
    with pytest.raises(MalformedFrame, match="over monty_max_frame_bytes=1024") as caught:
        request(b"\xff" * 1025, CAPS)  # not a protobuf message either: the size is what refuses it
    assert caught.value.too_large


def test_values_over_the_cap_are_refused_by_count():
    nodes = [pb.MontyNode(none=pb.Unit()) for _ in range(9)]
    feed = pb.ParentRequest(feed=pb.Feed(code="x", values=pb.Arena(nodes=nodes))).SerializeToString()
    with pytest.raises(MalformedFrame, match="9 values or entries, over monty_max_values=8"):
        request(feed, CAPS)
    complete = pb.ChildEvent(complete=pb.Complete(values=pb.Arena(nodes=nodes))).SerializeToString()
    with pytest.raises(MalformedFrame, match="monty_max_values"):
        event(complete, CAPS)


def test_dump_and_load_are_answered_by_the_relay():
    for kind in ("dump", "load"):
        message = pb.ParentRequest(**{kind: getattr(pb, kind.capitalize())()}).SerializeToString()
        answered = request(message, CAPS)
        assert answered.data == b""
        assert "stores no sessions" in pb.ChildEvent.FromString(answered.refusal).error.exception.message


def test_a_worker_event_names_its_plain_calls_only():
    call = pb.ChildEvent(function_call=pb.FunctionCall(function_name="refund", call_id=7)).SerializeToString()
    assert (event(call, CAPS).name, event(call, CAPS).call_id) == ("refund", 7)
    method = pb.FunctionCall(function_name="refund", call_id=7, object_id=pb.Uuid(data=b"\x00" * 16))
    assert event(pb.ChildEvent(function_call=method).SerializeToString(), CAPS).name is None
    with pytest.raises(MalformedFrame, match="carries no event"):
        event(b"", CAPS)


@pytest.mark.parametrize(
    ("table", "refused"),
    [
        ({}, set()),
        ({"deny": ["quote_shipping"]}, {"quote_shipping"}),
        ({"deny": ["client:refund"]}, {"refund"}),
        ({"allow": ["quote_shipping"]}, {"refund", "lookup_order"}),
        ({"allow": ["mcp:docs"]}, set()),  # an allow list of MCP entries only leaves other tools alone
        ({"allow": []}, {"quote_shipping", "refund", "lookup_order"}),
        ({"profile": "minimal"}, set()),  # profiles choose native groups only
    ],
)
def test_the_keys_policy_per_name(table, refused):
    policy = FunctionPolicy(ToolPolicy.from_config(table) if table else None)
    names = {"quote_shipping", "refund", "lookup_order"}
    assert {n for n in names if policy.refusal(n) is not None} == refused
