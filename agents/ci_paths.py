"""Where CI services find their configuration. A change there can reach the CI's secrets and tokens: the engineer
may not write it (agents.schemas.engineering), the scope guard flags it (agents.repo.scope) and autonomous mode
leaves a deployment that touches it to a person (lifecycle.services.autonomous)."""
from __future__ import annotations

import fnmatch

# at the root or in any directory (monorepos nest them)
CI = (".github/workflows/*", ".github/actions/*", ".gitlab-ci.yml", ".gitlab/ci/*", ".circleci/*", "Jenkinsfile", ".travis.yml",
      "azure-pipelines.yml", ".buildkite/*", "bitbucket-pipelines.yml", ".drone.yml", ".woodpecker.yml", ".woodpecker/*")


def is_ci(path: str) -> bool:
    return any(fnmatch.fnmatchcase("/" + path, "*/" + pattern) for pattern in CI)


def devops_owned(path: str) -> bool:
    """A CI configuration, or anything else under .github/ (its settings and automation run on the host's side):
    DevOps writes it, a person approves a change to it."""
    return path.startswith(".github/") or is_ci(path)
