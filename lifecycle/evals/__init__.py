"""Evaluation suites (docs/evals.md, ADR 37): cases run through the whole team under the evaluation policy, judged
by hidden tests the team never sees, measured and stored as EvalRun and EvalCase rows."""
