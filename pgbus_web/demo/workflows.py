"""The three demo workflows, shared by the demo, the seeder and the tests.

Whether a step fails is decided by the run's arguments, so a test (or the
seeder) chooses the story: ``"fail_capture": true`` fails every attempt of
capture_payment, ``"fail_capture": 1`` only the first one. The live demo
draws those flags at random when it starts runs (``sample_arguments``).
"""

from __future__ import annotations

import random
import smtplib
from datetime import timedelta
from typing import Any

from ..runtime.definitions import (
    ON_FAILURE_FAIL,
    Backoff,
    FanOut,
    Registry,
    Step,
    StepContext,
    Workflow,
)

ORDER = "OrderWorkflow"
ONBOARDING = "OnboardingWorkflow"
REFUND = "RefundWorkflow"

# Subject types of the runs of each class ("Order 1042").
SUBJECT_TYPES = {ORDER: "Order", ONBOARDING: "User", REFUND: "Refund"}

SHIPMENT_SIGNAL = "shipment_confirmed"
PROFILE_SIGNAL = "profile_completed"

# Fan-out size bounds of notify_vendors (one job per vendor).
MIN_VENDORS = 3
MAX_VENDORS = 12

CAPTURE_ERROR = "payment gateway did not answer within 5s"
SMTP_ERROR = "Connection unexpectedly closed"
REFUND_ERROR = "refund exceeds the captured amount"


def _fails(ctx: StepContext, flag: str) -> bool:
    """True when the run's *flag* argument says this attempt fails: true
    fails every attempt, a number n fails the first n attempts."""
    value = ctx.arguments.get(flag)
    if value is True:
        return True
    if isinstance(value, int) and not isinstance(value, bool):
        return ctx.attempt <= value
    return False


# OrderWorkflow ---------------------------------------------------------------


def reserve_stock(ctx: StepContext) -> dict[str, Any]:
    return {"reserved": True, "order_id": ctx.arguments.get("order_id")}


def capture_payment(ctx: StepContext) -> dict[str, Any]:
    if _fails(ctx, "fail_capture"):
        raise TimeoutError(CAPTURE_ERROR)
    return {"captured_cents": ctx.arguments.get("amount_cents", 0)}


def vendor_count(arguments: dict[str, Any]) -> int:
    vendors = arguments.get("vendors")
    if isinstance(vendors, int) and not isinstance(vendors, bool) and vendors >= 0:
        return vendors
    order_id = arguments.get("order_id")
    seed = order_id if isinstance(order_id, int) else 0
    return MIN_VENDORS + seed % (MAX_VENDORS - MIN_VENDORS + 1)


def notify_vendors(ctx: StepContext) -> FanOut:
    return FanOut(jobs=vendor_count(ctx.arguments))


def await_shipment(ctx: StepContext) -> dict[str, Any]:
    payload = ctx.signal.payload if ctx.signal else {}
    return {"tracking": payload.get("tracking")}


def send_receipt(ctx: StepContext) -> dict[str, Any]:
    return {"sent": True}


# OnboardingWorkflow ----------------------------------------------------------


def create_account(ctx: StepContext) -> dict[str, Any]:
    return {"user_id": ctx.arguments.get("user_id")}


def send_welcome_email(ctx: StepContext) -> dict[str, Any]:
    if _fails(ctx, "fail_welcome_email"):
        raise smtplib.SMTPServerDisconnected(SMTP_ERROR)
    return {"sent": True}


def send_tips(ctx: StepContext) -> dict[str, Any]:
    return {"sent": True}


def await_profile(ctx: StepContext) -> dict[str, Any]:
    return {"profile": ctx.signal.payload if ctx.signal else {}}


def activate(ctx: StepContext) -> dict[str, Any]:
    return {"active": True}


# RefundWorkflow --------------------------------------------------------------


def validate_refund(ctx: StepContext) -> dict[str, Any]:
    return {"valid": True}


def issue_refund(ctx: StepContext) -> dict[str, Any]:
    if _fails(ctx, "fail_refund"):
        raise ValueError(REFUND_ERROR)
    return {"refunded_cents": ctx.arguments.get("amount_cents", 0)}


def notify_customer(ctx: StepContext) -> dict[str, Any]:
    return {"sent": True}


ORDER_WORKFLOW = Workflow(
    ORDER,
    [
        Step("reserve_stock", reserve_stock),
        Step(
            "capture_payment",
            capture_payment,
            retries=2,
            backoff=Backoff(base=timedelta(seconds=10), factor=2.0),
        ),
        Step("notify_vendors", notify_vendors, fan_out=True),
        Step(
            "await_shipment",
            await_shipment,
            wait_for=SHIPMENT_SIGNAL,
            wait_timeout=timedelta(days=3),
        ),
        Step("send_receipt", send_receipt),
    ],
)

ONBOARDING_WORKFLOW = Workflow(
    ONBOARDING,
    [
        Step("create_account", create_account),
        Step(
            "send_welcome_email",
            send_welcome_email,
            retries=1,
            backoff=Backoff(base=timedelta(minutes=1), factor=1.0),
        ),
        Step("send_tips", send_tips, delay=timedelta(days=1)),
        Step("await_profile", await_profile, wait_for=PROFILE_SIGNAL),
        Step("activate", activate),
    ],
)

REFUND_WORKFLOW = Workflow(
    REFUND,
    [
        Step("validate_refund", validate_refund),
        Step(
            "issue_refund",
            issue_refund,
            retries=1,
            backoff=Backoff(base=timedelta(seconds=10), factor=1.0),
            on_failure=ON_FAILURE_FAIL,
        ),
        Step("notify_customer", notify_customer),
    ],
)

REGISTRY = Registry([ORDER_WORKFLOW, ONBOARDING_WORKFLOW, REFUND_WORKFLOW])


# The demo's customers: orders and refunds name one of them in their
# arguments, so a search by argument (arg.customer_id=42) finds a few runs.
CUSTOMERS = 250


def customer_of(number: int) -> int:
    """The customer of the *number*-th demo order or refund."""
    return 1 + number % CUSTOMERS


def sample_arguments(
    workflow_class: str, number: int, rng: random.Random, failure_share: float = 0.2
) -> dict[str, Any]:
    """Arguments for the *number*-th demo run of *workflow_class*, each
    failure flag set with probability *failure_share*."""

    def flag() -> bool:
        return rng.random() < failure_share

    if workflow_class == ORDER:
        return {
            "order_id": number,
            "customer_id": customer_of(number),
            "amount_cents": rng.randrange(500, 50_000),
            "vendors": rng.randint(MIN_VENDORS, MAX_VENDORS),
            "fail_capture": flag(),
        }
    if workflow_class == ONBOARDING:
        return {"user_id": number, "fail_welcome_email": flag()}
    if workflow_class == REFUND:
        return {
            "refund_id": number,
            "customer_id": customer_of(number),
            "amount_cents": rng.randrange(500, 20_000),
            "fail_refund": flag(),
        }
    raise KeyError(workflow_class)
