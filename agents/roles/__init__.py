"""The team's roles and their jobs. Each is a pure function of its context and an LLM."""
from agents.roles.base import Agent, AgentByContext
from agents.schemas import (
    BugTicketContext,
    BugTicketOutput,
    BusinessAnalystOutput,
    CodeReviewVerdict,
    DevOpsOutput,
    EngineerOutput,
    ImplementationPlanOutput,
    PlanContext,
    ProductOwnerContext,
    ProductOwnerOutput,
    QCOutput,
    ReviewVerdict,
    TechnicalSpecOutput,
    TicketPlanContext,
    TicketPlanOutput,
    TriageOutput,
)

PRODUCT_OWNER = Agent(
    role="product_owner", output=ProductOwnerOutput,
    task="Clarify this brief into a requirement, or ask what must be answered first.",
)
BUSINESS_ANALYST = Agent(
    role="business_analyst", output=BusinessAnalystOutput,
    task="Write the user stories for this clarified requirement.",
)
TECH_ARCHITECT = Agent(
    role="tech_architect", output=TechnicalSpecOutput,
    task="Design the technical specification and its ADRs for these functional requirements.",
)
DESIGN_REVIEWER = Agent(
    role="tech_lead", prompt="tech_lead_design_review", output=ReviewVerdict,
    task="Review this technical specification against the functional requirements.",
)
PLANNER = Agent(
    role="tech_lead", prompt="tech_lead_plan", output=ImplementationPlanOutput,
    task="Break this specification into implementation tasks.",
)
ENGINEER = Agent(
    role="senior_engineer", output=EngineerOutput,
    task="Implement this task: write its source files and their tests.",
)
FIXER = Agent(
    role="senior_engineer", prompt="senior_engineer_fix", output=EngineerOutput,
    task="Make the failing tests pass and address the notes; rewrite whole files.",
)
CODE_REVIEWER = Agent(
    role="tech_lead", prompt="tech_lead_code_review", output=CodeReviewVerdict,
    task="Review this change: the diff summary, the files and the test results.",
)
QC_ENGINEER = Agent(
    role="qc_engineer", output=QCOutput,
    task="Write acceptance tests for these criteria against the public interfaces.",
)
DEVOPS_ENGINEER = Agent(
    role="devops_engineer", output=DevOpsOutput,
    task="Write the CI workflow, the deployment runbook and the rollback procedure.",
)

# The bug_fix playbook (lifecycle/playbooks.py): a ticket instead of stories and a spec.
TICKET_CLARIFIER = Agent(
    role="product_owner", prompt="product_owner_ticket", output=BugTicketOutput,
    task="Clarify this bug ticket: what is wrong, and what must hold once it is fixed.",
)
TICKET_PLANNER = Agent(
    role="tech_lead", prompt="tech_lead_plan_ticket", output=TicketPlanOutput,
    task="Break the fix of this bug ticket into implementation tasks.",
)
# A ticket's first step (lifecycle/services/product.py triage_apply): its kind decides the playbook, or ends the run.
TRIAGER = Agent(
    role="product_owner", prompt="product_owner_triage", output=TriageOutput,
    task="Triage this ticket: say what kind of work it asks for, or answer or refuse it.",
)
CLARIFY_JOBS = AgentByContext({ProductOwnerContext: PRODUCT_OWNER, BugTicketContext: TICKET_CLARIFIER})
PLAN_JOBS = AgentByContext({PlanContext: PLANNER, TicketPlanContext: TICKET_PLANNER})
