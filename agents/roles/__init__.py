"""The team's roles, by name."""
from agents.roles.base import Agent
from agents.schemas import BusinessAnalystOutput, ProductOwnerOutput

PRODUCT_OWNER = Agent(
    role="product_owner", output=ProductOwnerOutput,
    task="Clarify this brief into a requirement, or ask what must be answered first.",
)
BUSINESS_ANALYST = Agent(
    role="business_analyst", output=BusinessAnalystOutput,
    task="Write the user stories for this clarified requirement.",
)
ROLES = {agent.role: agent for agent in (PRODUCT_OWNER, BUSINESS_ANALYST)}
