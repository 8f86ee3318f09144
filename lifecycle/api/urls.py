from rest_framework.routers import DefaultRouter

from lifecycle.api.conversations import ApprovalViewSet, ConversationViewSet
from lifecycle.api.meta_eval import MetaEvalViewSet
from lifecycle.api.promotions import PromotionViewSet
from lifecycle.api.views import ProjectViewSet, RequirementViewSet, ReviewTaskViewSet

router = DefaultRouter()
router.register("requirements", RequirementViewSet, basename="requirement")
router.register("review-tasks", ReviewTaskViewSet, basename="review-task")
router.register("projects", ProjectViewSet, basename="project")
router.register("conversations", ConversationViewSet, basename="conversation")
router.register("approvals", ApprovalViewSet, basename="approval")
router.register("promotions", PromotionViewSet, basename="promotion")
router.register("meta-eval", MetaEvalViewSet, basename="meta-eval")
urlpatterns = router.urls
