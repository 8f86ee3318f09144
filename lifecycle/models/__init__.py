from lifecycle.models.artifacts import Artifact, ArtifactBlob
from lifecycle.models.audit import OutboxEvent, StateTransition
from lifecycle.models.conversation_email import ConversationEmail
from lifecycle.models.conversations import (
    ActionApproval,
    ActionPreauthorization,
    Conversation,
    ConversationChannelBinding,
    ConversationParticipant,
    Message,
    ToolCall,
)
from lifecycle.models.evals import EvalCase, EvalOutcome, EvalRun, HiddenResult
from lifecycle.models.inbox import StoryEdit
from lifecycle.models.intake import IdempotencyKey
from lifecycle.models.llm import LLMCall
from lifecycle.models.meta_eval import AppendOnlyError, MetaEvalLog, MetaKind
from lifecycle.models.notifications import Notification
from lifecycle.models.plan import ImplementationTask
from lifecycle.models.promotions import PromotedArtifact, PromotionDecision
from lifecycle.models.prompts import PromptBundle
from lifecycle.models.replay import Replay
from lifecycle.models.requirement import Requirement, RequirementDoc
from lifecycle.models.review import ReviewTask
from lifecycle.models.routing import FailureRoute
from lifecycle.models.slack import SlackIdentity, SlackMessageSeen, SlackWorkspace
from lifecycle.models.steps import Step
from lifecycle.models.stories import UserStory
from lifecycle.models.tenancy import Membership, Organization, Project
from lifecycle.models.tokens import ApiToken
from lifecycle.models.webhooks import WebhookDelivery

__all__ = [
    "ActionApproval", "ActionPreauthorization", "Conversation", "ConversationChannelBinding",
    "ConversationEmail", "ConversationParticipant", "Message", "ToolCall",
    "ApiToken", "Artifact", "ArtifactBlob", "FailureRoute", "IdempotencyKey", "ImplementationTask", "LLMCall",
    "Membership", "Organization", "OutboxEvent", "Project",
    "PromotedArtifact", "PromotionDecision", "PromptBundle", "Replay",
    "Requirement", "RequirementDoc", "ReviewTask", "StateTransition", "Step", "UserStory",
    "SlackIdentity", "SlackMessageSeen", "SlackWorkspace",
    "Notification", "StoryEdit", "WebhookDelivery",
    "EvalCase", "EvalOutcome", "EvalRun", "HiddenResult",
    "AppendOnlyError", "MetaEvalLog", "MetaKind",
]
