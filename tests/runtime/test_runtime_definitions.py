"""Workflow definitions and the registry (no database)."""

from datetime import timedelta

import pytest

from pgbus_web.demo import workflows as demo
from pgbus_web.runtime.definitions import (
    Backoff,
    DefinitionError,
    Registry,
    Step,
    Workflow,
)


def noop(ctx):
    return None


def test_steps_keep_their_declared_order():
    flow = Workflow("Flow", [Step("a", noop), Step("b", noop), Step("c", noop)])
    assert flow.step_names == ("a", "b", "c")


def test_next_step_walks_the_list_and_ends_with_none():
    flow = Workflow("Flow", [Step("a", noop), Step("b", noop)])
    assert flow.next_step("a").name == "b"
    assert flow.next_step("b") is None


def test_next_step_of_an_unknown_step_raises_key_error():
    with pytest.raises(KeyError):
        Workflow("Flow", [Step("a", noop)]).next_step("zzz")


def test_decorator_declares_steps_named_after_functions():
    flow = Workflow("Flow")

    @flow.step()
    def first(ctx):
        return 1

    @flow.step("second_one", retries=2)
    def second(ctx):
        return 2

    assert flow.step_names == ("first", "second_one")
    assert flow.get_step("second_one").max_attempts == 3


def test_digest_changes_when_steps_are_reordered_and_not_otherwise():
    one = Workflow("Flow", [Step("a", noop), Step("b", noop)])
    same = Workflow("Flow", [Step("a", noop, retries=3), Step("b", noop)])
    swapped = Workflow("Flow", [Step("b", noop), Step("a", noop)])
    assert one.digest == same.digest
    assert one.digest != swapped.digest


def test_a_step_declared_twice_is_refused():
    with pytest.raises(DefinitionError, match="twice"):
        Workflow("Flow", [Step("a", noop), Step("a", noop)])


@pytest.mark.parametrize(
    "options",
    [
        {"retries": -1},
        {"on_failure": "explode"},
        {"delay": timedelta(0)},
        {"wait_timeout": timedelta(hours=1)},
        {"wait_for": "go", "fan_out": True},
    ],
)
def test_bad_step_options_are_refused(options):
    with pytest.raises(DefinitionError):
        Step("a", noop, **options)


def test_backoff_grows_exponentially_up_to_its_cap():
    backoff = Backoff(base=timedelta(seconds=10), factor=2, max=timedelta(seconds=25))
    assert [backoff.delay(n).total_seconds() for n in (1, 2, 3)] == [10, 20, 25]


def test_registry_get_returns_none_for_an_unknown_class():
    registry = Registry([Workflow("Flow", [Step("a", noop)])])
    assert registry.get("Flow").name == "Flow"
    assert registry.get("Nope") is None
    assert registry.get(None) is None


def test_registry_refuses_a_class_registered_twice():
    registry = Registry([Workflow("Flow", [Step("a", noop)])])
    with pytest.raises(DefinitionError):
        registry.register(Workflow("Flow", [Step("b", noop)]))


def test_demo_registry_declares_the_catalogue():
    assert set(demo.REGISTRY.names) == {"OrderWorkflow", "OnboardingWorkflow", "RefundWorkflow"}
    order = demo.REGISTRY.get("OrderWorkflow")
    assert order.step_names == (
        "reserve_stock",
        "capture_payment",
        "notify_vendors",
        "await_shipment",
        "send_receipt",
    )
    assert order.get_step("capture_payment").max_attempts == 3
    assert order.get_step("notify_vendors").fan_out
    assert order.get_step("await_shipment").wait_for == "shipment_confirmed"
    assert order.get_step("await_shipment").wait_timeout == timedelta(days=3)
    onboarding = demo.REGISTRY.get("OnboardingWorkflow")
    assert onboarding.get_step("send_tips").delay == timedelta(days=1)
    assert onboarding.get_step("await_profile").wait_timeout is None
    refund = demo.REGISTRY.get("RefundWorkflow")
    assert refund.get_step("issue_refund").on_failure == "fail"
    assert refund.get_step("issue_refund").max_attempts == 2
