"""The notification store on Redis: each event's notification is sent once, however often the
event is delivered. A guard key per event and the sent list change together, in one Lua script,
so a crash between them cannot send without marking or mark without sending."""

from __future__ import annotations

from collections import Counter

import redis

# Marks the event as notified and appends it to the sent list, only if it was not marked yet.
SEND_ONCE = """
if redis.call("SET", KEYS[1], "1", "NX") then
  redis.call("RPUSH", KEYS[2], ARGV[1])
  return 1
end
return 0
"""


class RedisNotifications:
    """Notifications of one namespace (a lesson's, say): `{namespace}:sent` lists every
    notification sent, in order; `{namespace}:notified:{event_id}` guards each event."""

    def __init__(self, url: str, namespace: str) -> None:
        # Short timeouts: a store that is down must fail the request at once, not hang it.
        self.client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        self.namespace = namespace
        self.sent_key = f"{namespace}:sent"
        self._send_once = self.client.register_script(SEND_ONCE)

    def notify_once(self, event_id: str) -> bool:
        """Sends the event's notification unless it was sent before; True when sent now."""
        guard = f"{self.namespace}:notified:{event_id}"
        return self._send_once(keys=[guard, self.sent_key], args=[event_id]) == 1

    def sent(self) -> Counter[str]:
        """How many notifications each event has had."""
        return Counter(item.decode() for item in self.client.lrange(self.sent_key, 0, -1))
