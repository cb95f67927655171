"""Calls straight to one asyncio Cluster node, and the slot table they
route by. redis-py's asyncio Cluster path answers a node that refuses by
disconnecting every node (``aclose``: the calls in flight on the live
primaries fail too) and reloads the slot table on the next caller's time;
its reload asks the first primary for the COMMAND table, so while that
primary is down it failed every time (CLIENTS.md §3: one primary down
leaves the others' keys decided by Redis, within the budget)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

import redis

log = logging.getLogger("redis_rl")

# What a node that cannot be reached raises (refused, broken, timed out).
UNREACHABLE = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError, OSError)


async def slot_table(client: Any) -> None:
    """Loads ``client``'s slot table when none was ever loaded (its first
    call). Never again on a call's time, whatever redis-py flagged: a table
    once loaded stays right while a primary is down, and slots that moved
    answer MOVED, which redis-py's own path follows and relearns."""
    if client.nodes_manager.slots_cache:
        return
    try:
        await client.initialize()
    except Exception:
        if not client.nodes_manager.slots_cache:  # no slot table learnt: nothing to route by
            raise
        # The slot table was learnt, then the COMMAND table's primary refused: enough to route by.


def slot_primaries(reply: Any, current_host: str) -> set[str]:
    """The primaries (``host:port``, as redis-py names nodes) of a raw
    ``CLUSTER SLOTS`` reply: ``[[start, end, [host, port, id], replicas...], ...]``."""
    out = set()
    for entry in reply:
        host, port = entry[2][0], entry[2][1]
        host = host.decode() if isinstance(host, bytes) else str(host)
        out.add(f"{host or current_host}:{int(port)}")
    return out


async def relearn(client: Any, dead: str) -> None:
    """As ``RateLimiter._relearn``: when a live primary no longer names
    ``dead`` a primary, the slot table is loaded again (the guard's probe
    calls it, off every call's time). Only the node table is reloaded
    (redis-py's ``initialize`` asks the first primary for its COMMAND table
    too, which our calls do not need); redis-py replaces every node's object
    doing so, so calls in flight then may fail once: once per failover."""
    for node in client.get_primaries():
        if node.name == dead:
            continue
        try:
            reply = await asyncio.wait_for(node_command(node, ("CLUSTER SLOTS",)), 0.5)
        except Exception:
            continue
        if dead not in slot_primaries(reply, node.host):
            log.warning("redis_rl: %s no longer serves slots (a failover): slot table loaded again", dead)
            await client.nodes_manager.initialize()
        return


async def node_command(node: Any, args: tuple[Any, ...]) -> Any:
    """``args`` on an asyncio ``ClusterNode``, sent once more on a fresh
    connection when the connection breaks (as the standalone client's
    ``Retry(NoBackoff(), 1)`` on ``ConnectionError``). ClusterNode hands out
    its pooled sockets unchecked (no pool health check as redis-py's sync
    ConnectionPool does), so after the node restarted every idle one is dead:
    they are disconnected (reconnected on next use), those in use by other
    calls left alone. A node really down refuses the second connection at
    once. Not on TimeoutError: a timed-out call may have run (the guard gives
    a late admission back)."""
    try:
        return (await _on_connection(node, [args]))[0]
    except redis.exceptions.ConnectionError:
        await drop_idle(node)
        return (await _on_connection(node, [args]))[0]


async def node_pipeline(node: Any, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``commands`` pipelined on an asyncio ``ClusterNode`` (one round
    trip), each reply or its error reply in order; sent once more on a
    fresh connection when the connection breaks, as ``node_command``."""
    try:
        return await _on_connection(node, commands, replies_may_fail=True)
    except redis.exceptions.ConnectionError:
        await drop_idle(node)
        return await _on_connection(node, commands, replies_may_fail=True)


async def _on_connection(node: Any, commands: Sequence[tuple[Any, ...]], replies_may_fail: bool = False) -> list[Any]:
    """``commands`` on one pooled connection of ``node``, sent together.
    As ``ClusterNode.execute_command``/``execute_pipeline``, except that the
    connection goes back to the pool also when the send fails (redis-py's
    keep it out of the pool for good: one connection object leaked per call
    refused by a dead node, 8 a second from a circuit's probe; it reconnects
    on its next use). An error reply is returned in its place when
    ``replies_may_fail``, else raised; a broken connection is raised."""
    connection = node.acquire_connection()
    try:
        await connection.send_packed_command(connection.pack_commands(commands), False)
        replies: list[Any] = []
        for args in commands:
            try:
                replies.append(await node.parse_response(connection, args[0]))
            except redis.exceptions.ResponseError as e:
                if not replies_may_fail:
                    raise
                replies.append(e)
        return replies
    finally:
        node._free.append(connection)


async def drop_idle(node: Any) -> None:
    """Disconnects the idle pooled connections of ``node`` (reconnected on
    next use); those in use by other calls are left alone."""
    idle = list(node._free)  # ClusterNode has no API for its idle connections
    node._free.clear()  # none handed out while being disconnected
    try:
        for connection in idle:
            await connection.disconnect(nowait=True)
    finally:
        node._free.extend(idle)
