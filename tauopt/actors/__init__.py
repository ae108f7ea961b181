"""A small actor runtime on anyio.

    mailbox      a bounded memory object stream of Requests
    Request      a frozen message plus its Reply (a one-shot answer slot)
    ActorRef     what callers hold: `await ref.ask(message)`; an actor may give its
                 ref a `peek` that answers some messages at once (reads of durable state)
    serve()      the loop: one message at a time, a failing handler answers
                 its caller with an internal error and the actor goes on
    checkpoint() one turn of the event loop for the others (anyio's, cheaper on asyncio)

The actor decides when to reply (`reply(request, value)` /
`fail(request, error)`); a reply may be sent later than the handler returns
(after a store commit, or when a background result lands). Replies are given
at once and never wait: a caller that has gone away is dropped.
"""

from ._runtime import NOT_NOW, ActorGone, ActorRef, Reply, Request, checkpoint, close_mailbox, fail, mailbox, reply, serve

__all__ = ["ActorGone", "ActorRef", "NOT_NOW", "Reply", "Request", "checkpoint", "close_mailbox", "fail", "mailbox", "reply", "serve"]
