"""The team's roles and their jobs. Each is a pure function of its context and an LLM."""
from agents.roles.base import Agent, AgentByContext
from agents.schemas import (
    BugTicketContext,
    BugTicketOutput,
    BusinessAnalystOutput,
    CodeReviewVerdict,
    DevOpsOutput,
    EditsOutput,
    EngineerContext,
    EngineerOutput,
    FixContext,
    ImplementationPlanOutput,
    LocalizationOutput,
    PlanContext,
    ProductOwnerContext,
    ProductOwnerOutput,
    QCOutput,
    RepoEngineerContext,
    RepoFixContext,
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

# On an existing repository (docs/adr/0035): the Tech Lead localizes the change before planning it, and the
# engineer answers with search/replace blocks; the context's type picks the job, so STEPS keeps one entry a step.
LOCALIZER = Agent(
    role="tech_lead", prompt="tech_lead_localize", output=LocalizationOutput,
    task="Pick the files and definitions of this repository to change or read for the ticket, each with a reason.",
)
ENGINEER_EDITS = Agent(
    role="senior_engineer", prompt="senior_engineer_edits", output=EditsOutput,
    task="Implement this task in the repository: search/replace blocks for existing files, whole files only for new "
    "ones.",
)
FIXER_EDITS = Agent(
    role="senior_engineer", prompt="senior_engineer_fix_edits", output=EditsOutput,
    task="Make the failing tests pass and address the notes with search/replace blocks on the files as they stand.",
)
ENGINEER_JOBS = AgentByContext({EngineerContext: ENGINEER, RepoEngineerContext: ENGINEER_EDITS})
FIX_JOBS = AgentByContext({FixContext: FIXER, RepoFixContext: FIXER_EDITS})
