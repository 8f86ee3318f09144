"""Ticket webhooks from GitHub, GitLab and Jira: /webhooks/<source>/<project id>/.

Each request is checked on its raw body before anything in it is read (signatures.py, with the secret the
project names: secret_envs.py); an unknown project, a webhook the project has not turned on and a bad or missing
signature all get the same 401, so project ids cannot be probed. A verified payload is read by its source's
module (github.py, gitlab.py, jira.py: pure functions, no database) into a Reading: a ticket that starts a run,
or why the event is ignored. views.py hands a ticket to lifecycle.services.tickets, which records the delivery
id so a repeat does nothing.
"""
