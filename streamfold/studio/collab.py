"""The shared query text: a Yjs document with the server as one more peer (pycrdt), spoken to
by the browsers' ``y-websocket`` provider.

The y-websocket protocol (each message: a varint type, then its body)::

    0 sync  0 step 1: the sender's state vector     → reply step 2: the updates it lacks
            1 step 2: updates answering a step 1    → apply
            2 update: an edit                       → apply, relay to the other peers
    1 awareness: varint count, then per client (varint id, varint clock, JSON state) — cursors,
                 selections and names; kept per client and relayed
    3 query awareness                               → reply with every known client's state

On connection the server sends its step 1 and every known awareness state, so a late joiner
receives the whole text (the step 2 answering its step 1) and the others' cursors, then the
edits as they happen. The server's document is the one compiled, run and saved; the CRDT makes
every peer's copy converge to it whatever order the edits arrive in. When a browser leaves, its
cursors are removed for everyone.
"""

from __future__ import annotations

from collections.abc import Callable

from pycrdt import (
    Awareness, Decoder, Doc, Text, YMessageType, YSyncMessageType, create_awareness_message, create_sync_message,
    create_update_message, handle_sync_message, read_message,
)
from starlette.websockets import WebSocket, WebSocketDisconnect

from .peers import Peer

QUERY_AWARENESS = 3
TEXT_NAME = "sql"  # the Y.Text the page binds its editor to


class DocRoom:
    """One query's shared text and the peers editing it. Used from the event loop only."""

    def __init__(self, saved: bytes | None, text: str, on_change: Callable[[str], None]) -> None:
        self.doc: Doc = Doc()
        self.text = self.doc.get(TEXT_NAME, type=Text)
        if saved:
            self.doc.apply_update(saved)
        elif text:
            self.text.insert(0, text)
        self.awareness = Awareness(self.doc)
        self.awareness.set_local_state(None)  # the server shows no cursor
        self._on_change = on_change
        self.peers: dict[Peer, set[int]] = {}  # each peer with the awareness clients it announced

    @property
    def value(self) -> str:
        return str(self.text)

    def state(self) -> bytes:
        """The whole document as one update (what is saved)."""
        return self.doc.get_update()

    def replace(self, text: str) -> None:
        """Set the text from the server side (e.g. a query created with a text); sent to all."""
        before = self.doc.get_state()
        with self.doc.transaction():
            del self.text[:]
            self.text.insert(0, text)
        self._relay(create_update_message(self.doc.get_update(before)), None)
        self._on_change(self.value)

    async def serve(self, ws: WebSocket) -> None:
        """Speak the protocol with one browser until it leaves."""
        peer = Peer(ws)
        self.peers[peer] = set()
        peer.send(create_sync_message(self.doc))
        known = list(self.awareness.states)
        if known:
            peer.send(create_awareness_message(self.awareness.encode_awareness_update(known)))
        try:
            while True:
                message = await ws.receive_bytes()
                if message:
                    self._receive(peer, message)
        except WebSocketDisconnect:
            pass
        finally:
            self._leave(peer)
            await peer.finish()

    def _receive(self, peer: Peer, message: bytes) -> None:
        kind = message[0]
        if kind == YMessageType.SYNC:
            reply = handle_sync_message(message[1:], self.doc)
            if reply is not None:
                peer.send(reply)
            if message[1] in (YSyncMessageType.SYNC_STEP2, YSyncMessageType.SYNC_UPDATE):
                update = read_message(message[2:])
                if update != b"\x00\x00":
                    self._relay(create_update_message(update), peer)
                    self._on_change(self.value)
        elif kind == YMessageType.AWARENESS:
            update = read_message(message[1:])
            self.peers[peer].update(_awareness_clients(update))
            self.awareness.apply_awareness_update(update, peer)
            self._relay(message, peer)
        elif kind == QUERY_AWARENESS:
            known = list(self.awareness.states)
            peer.send(create_awareness_message(self.awareness.encode_awareness_update(known)))

    def _relay(self, message: bytes, origin: Peer | None) -> None:
        for other in self.peers:
            if other is not origin:
                other.send(message)

    def _leave(self, peer: Peer) -> None:
        clients = [c for c in self.peers.pop(peer, set()) if c in self.awareness.states]
        if clients:
            self.awareness.remove_awareness_states(clients, peer)
            self._relay(create_awareness_message(self.awareness.encode_awareness_update(clients)), peer)


def _awareness_clients(update: bytes) -> list[int]:
    """The client ids an awareness update speaks for."""
    decoder = Decoder(update)
    ids = []
    for _ in range(decoder.read_var_uint()):
        ids.append(decoder.read_var_uint())
        decoder.read_var_uint()  # clock
        decoder.read_var_string()  # state
    return ids
