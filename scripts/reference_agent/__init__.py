"""The reference agent, as a small package; ``scripts/a2a_server_reference.py`` runs it.

* :mod:`.skill` - the skill handler (replace it with your own work)
* :mod:`.config` - environment variables
* :mod:`.agent` - start-up, registration, lifecycle
* :mod:`.http_side` - A2A HTTP+JSON with the official a2a-sdk server
* :mod:`.gateway` - the platform's WebSocket gateway
* :mod:`.messages` - A2A messages and artifacts shared by both sides
"""
