"""Every agent's context and output schema, by role."""
from agents.schemas.design import (
    ADR,
    ArchitectContext,
    Component,
    DataModel,
    DesignReviewContext,
    FunctionalRequirement,
    ImplementationPlanOutput,
    Interface,
    PlanContext,
    PlannedTask,
    ReviewVerdict,
    TechnicalSpecOutput,
)
from agents.schemas.edits import EditsOutput
from agents.schemas.engineering import (
    CodeReviewContext,
    CodeReviewVerdict,
    EngineerContext,
    EngineerOutput,
    FixContext,
    SourceFile,
)
from agents.schemas.localization import (
    LocalizationOutput,
    LocalizeContext,
    LocatedFile,
    RepoPlanContext,
    RepoTicketPlanContext,
    SearchHitView,
)
from agents.schemas.product import (
    BusinessAnalystContext,
    BusinessAnalystOutput,
    Clarification,
    ProductOwnerContext,
    ProductOwnerOutput,
    RequirementDocView,
    StoryFeedback,
    StoryOut,
)
from agents.schemas.quality import AcceptanceCriterion, DevOpsContext, DevOpsOutput, QCContext, QCOutput
from agents.schemas.repository import (
    BaselineFacts,
    ContextSource,
    Excerpt,
    FileView,
    RepoCodeReviewContext,
    RepoEngineerContext,
    RepoFixContext,
    RepoQCContext,
    RepositoryContext,
)
from agents.schemas.tickets import BugTicketContext, BugTicketOutput, Ticket, TicketPlanContext, TicketPlanOutput
from agents.schemas.triage import TriageContext, TriageOutput

__all__ = sorted(name for name in dir() if name[:1].isupper())
