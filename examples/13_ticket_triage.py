"""Support-ticket triage on two DBOS workers, with a human approving refunds.

    classify -> reply                                   (questions, bugs)
    classify -> refund_check -> approve (asks a human) -> reply

Every ticket is a run on the DBOS executor: a durable workflow in PostgreSQL
that either worker may take, and that the other finishes if one dies. A
refund waits for a human; the answer can come from any process, hours later.
Two commands, each in its own terminal (PostgreSQL at $SELECTGRAPH_DATABASE_URL,
by default the local server's ``selectgraph_tickets`` database, created if missing):

    python examples/13_ticket_triage.py workers    # two workers; Ctrl-C stops them
    python examples/13_ticket_triage.py tickets    # queue tickets, approve refunds, show outcomes

With no command it does both in one go: starts the two workers, sends the
tickets, approves the refunds, prints the outcomes and stops the workers.
Offline the reply agent uses the local provider; with an API key, a real model.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from selectgraph import END, Agent, AgentConfig, AgentGraph, InterruptRequest, NodeContext
from selectgraph.agents import default_provider
from selectgraph.executors import DBOSExecutor

DATABASE = os.environ.get(
    "SELECTGRAPH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/selectgraph_tickets"
)
HERE = Path(__file__).resolve()
WORKERS = ("worker-a", "worker-b")
TICKETS = {
    "ticket-1": "How do I export my invoices as CSV?",
    "ticket-2": "The app crashes when I upload a PDF.",
    "ticket-3": "I was charged twice this month, please refund 40 EUR.",
    "ticket-4": "Refund my annual plan (480 EUR), I never used it.",
    "ticket-5": "Can two people share one account?",
    "ticket-6": "Login fails with a crash on Android.",
}


class Ticket(BaseModel):
    """One ticket's state."""

    text: str = ""
    category: str = ""
    amount: int = 0
    approved: bool | None = None
    handled_by: list[str] = []
    reply: str = ""


def _worker(context: NodeContext) -> str:
    return os.environ.get("TRIAGE_WORKER", f"pid {os.getpid()}") + f" ({context.node})"


def classify(state: Any, context: NodeContext) -> dict[str, Any]:
    """Sort the ticket by keywords (a small model would do it in production)."""
    text = state["text"].lower()
    category = "refund" if "refund" in text else "bug" if "crash" in text else "question"
    numbers = ["".join(c for c in word if c.isdigit()) for word in text.split()]
    amount = next((int(n) for n in numbers if n), 0)
    return {
        "category": category,
        "amount": amount,
        "handled_by": [*state["handled_by"], _worker(context)],
    }


def route(state: Any) -> str:
    return "refund_check" if state["category"] == "refund" else "reply"


def refund_check(state: Any, context: NodeContext) -> dict[str, Any]:
    """Look the charge up (here: nothing to look up) before a human decides."""
    time.sleep(0.2)  # the billing system's latency
    return {"handled_by": [*state["handled_by"], _worker(context)]}


def approve(state: Any, context: NodeContext) -> Generator[InterruptRequest, Any, dict[str, Any]]:
    """A human approves or declines the refund; the run waits, durably, for the answer."""
    answer = yield InterruptRequest(
        f"Refund {state['amount']} EUR for: {state['text']!r}?",
        payload={"amount": state["amount"]},
    )
    return {"approved": answer == "approve", "handled_by": [*state["handled_by"], _worker(context)]}


writer = Agent(
    AgentConfig(name="support", instructions="Write a two-sentence reply to the customer."),
    provider=default_provider(),
)


def ask_writer(state: Any) -> str:
    decision = {True: "The refund is approved.", False: "The refund is declined."}
    return f"{state['text']} {decision.get(state['approved'], '')}".strip()


def replied(result: Any, state: Any) -> dict[str, Any]:
    worker = os.environ.get("TRIAGE_WORKER", f"pid {os.getpid()}")
    return {"reply": result.content, "handled_by": [*state["handled_by"], f"{worker} (reply)"]}


triage = AgentGraph("triage", state_schema=Ticket)
triage.add_node("classify", classify)
triage.add_conditional_edge("classify", route, ["refund_check", "reply"])
triage.add_node("refund_check", refund_check, next_node="approve")
triage.add_node("approve", approve, next_node="reply")
triage.add_node(
    "reply", writer, input_transform=ask_writer, output_transform=replied, next_node=END
)
graph = triage  # what selectgraph run/studio load (in process, without the DBOS workers)


def executor() -> DBOSExecutor:
    """The same executor on both sides: workers serve it, the ticket desk starts runs on it."""
    return DBOSExecutor(DATABASE, graphs={"triage": triage}, poll_interval=0.05)


# ------------------------------------------------------------------ commands
def start_workers() -> list[subprocess.Popen[bytes]]:
    """Two `selectgraph worker` processes serving the triage graph."""
    processes = []
    for name in WORKERS:
        env = dict(os.environ, TRIAGE_WORKER=name)
        processes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "selectgraph",
                    "worker",
                    "--graphs",
                    f"triage={HERE}:triage",
                    "--database-url",
                    DATABASE,
                    "--executor-id",
                    name,
                    "--poll-interval",
                    "0.05",
                    "--concurrency",
                    "3",  # small, so the two workers share the tickets
                ],
                env=env,
                stderr=subprocess.PIPE,
            )
        )
    for name, process in zip(WORKERS, processes, strict=True):
        assert process.stderr is not None
        said = []
        for line in process.stderr:  # wait until it serves
            if b"serving queue" in line:
                print(f"{name} is serving")
                break
            said.append(line.decode(errors="replace"))
        else:
            # Stop the others too: a worker left running would outlive this script.
            stop_workers(processes)
            raise SystemExit(f"{name} did not start:\n{''.join(said[-20:])}")
        # Keep reading what it logs: a full pipe would block the worker mid-run.
        threading.Thread(target=_pass_on, args=(process.stderr,), daemon=True).start()
    return processes


def _pass_on(stream: Any) -> None:
    for line in stream:
        sys.stderr.buffer.write(line)


def stop_workers(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def send_tickets(approve_all: bool = True) -> None:
    """Queue each ticket as a run, answer the refund questions, print how each ended."""
    desk = executor()
    stamp = time.strftime("%H%M%S")
    handles = {
        ticket: desk.start("triage", {"text": text}, run_id=f"{ticket}-{stamp}")
        for ticket, text in TICKETS.items()
    }
    for ticket, handle in handles.items():
        result = handle.result(timeout=120)
        if result.interrupted:
            question = result.interrupts[0]
            answer = "approve" if approve_all and question.payload["amount"] < 100 else "decline"
            print(f"{ticket}: {question.prompt} -> a human says {answer}")
            desk.resume(handle.run_id, question.id, answer)
            result = handle.result(timeout=120)
        state = result.state.data
        outcome = {True: "refund approved", False: "refund declined"}.get(
            state["approved"], state["category"]
        )
        print(f"{ticket}: {outcome}; ran on {', '.join(state['handled_by'])}")
        print(f"  reply: {state['reply'][:90]}")
    desk.close()


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else "demo"
    if command == "workers":
        processes = start_workers()
        print("Ctrl-C to stop them")
        try:
            for process in processes:
                process.wait()
        except KeyboardInterrupt:
            stop_workers(processes)
    elif command == "tickets":
        send_tickets()
    elif command == "demo":
        processes = start_workers()
        try:
            send_tickets()
        finally:
            stop_workers(processes)
        print("all tickets handled by two workers")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
