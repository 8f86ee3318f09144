"""Thin API views: validate input, call one service, serialize the result."""
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.settings import api_settings

from lifecycle import selectors
from lifecycle.actors import Actor
from lifecycle.api import serializers as s
from lifecycle.api.parsers import BoundedJSONParser
from lifecycle.errors import DomainError
from lifecycle.models import Project, Requirement, ReviewTask
from lifecycle.origin import request_origin
from lifecycle.replay.runs import replay_start
from lifecycle.services.assignment import review_claim, review_unassign
from lifecycle.services.cancellation import requirement_cancel_request
from lifecycle.services.decisions import review_decide
from lifecycle.services.intake import KEY_HEADER, KEY_MAX_CHARS, requirement_submit_once
from lifecycle.services.product import requirement_retriage
from lifecycle.services.projects import project_set_autonomous_deployments, with_autonomous_deployments
from lifecycle.services.tickets import ticket_submit
from lifecycle.states import PENDING_REVIEW_STATES, ReviewState
from lifecycle.tickets import Ticket

CONFLICT = OpenApiResponse(s.ErrorOut, description="an illegal transition: the object's state does not allow it now")


class RequirementViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = s.RequirementOut
    submission_actions = ("create", "replay")  # they start work: the tighter rate limit (lifecycle/api/throttles.py)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the OpenAPI generator: types only, no user
            return Requirement.objects.none()
        visible = selectors.requirements_visible_to(self.request.user)
        if self.action != "retrieve":
            return visible
        return visible.select_related("project", "replay_run").prefetch_related(
            "stories", "artifacts", "transitions__actor_user")

    def get_serializer_class(self):
        return s.RequirementSummaryOut if self.action == "list" else s.RequirementOut

    @extend_schema(request=s.RequirementIn, responses={
        201: s.RequirementCreatedOut,
        200: OpenApiResponse(s.RequirementCreatedOut, description="the ticket already has a live requirement in this "
                                                                  "project: that one, unchanged"),
        422: OpenApiResponse(s.ErrorOut, description=f"the {KEY_HEADER} was sent before with another submission")},
        parameters=[
        OpenApiParameter(KEY_HEADER, str, OpenApiParameter.HEADER, description=(
            f"optional, 1 to {KEY_MAX_CHARS} printable ASCII characters: a repeat of this POST with the same key and "
            "body (a retry) answers what the first one answered (201 with the requirement it made, or 200 with the "
            "ticket's live requirement it found) and `Idempotent-Replayed: true`; the key with another body is 422")),
        OpenApiParameter("Idempotent-Replayed", str, OpenApiParameter.HEADER, response=[200, 201], enum=["true"],
                         description=f"present when a repeat with an {KEY_HEADER} got the answer of the POST before"),
        OpenApiParameter("Location", str, OpenApiParameter.HEADER, response=[200, 201],
                         description="the requirement's URL")])
    def create(self, request):
        """Submit a brief, or a ticket (a second ticket with the same source and key gets the live one: 200)."""
        data = s.RequirementIn(data=request.data)
        data.is_valid(raise_exception=True)
        given, project = data.validated_data, None
        if "project" in given:
            project = Project.objects.filter(pk=given["project"], organization__memberships__user=request.user).first()
            if project is None:
                raise DomainError("no such project", "project")
        key = request.headers.get(KEY_HEADER)
        if "ticket" in given:
            submitted = ticket_submit(user=request.user, ticket=Ticket(**given["ticket"]), project=project,
                                      playbook=given["playbook"], idempotency_key=key)
        else:
            submitted = requirement_submit_once(user=request.user, idempotency_key=key, brief=given["brief"],
                                                title=given["title"], project=project, playbook=given["playbook"])
        requirement = submitted.requirement
        headers = {"Location": f"{request.path}{requirement.pk}/"} | (
            {"Idempotent-Replayed": "true"} if submitted.replayed else {})
        answer = status.HTTP_200_OK if submitted.live else status.HTTP_201_CREATED
        return Response(s.RequirementCreatedOut(requirement).data, status=answer, headers=headers)

    @extend_schema(parameters=[s.RoutingQueryIn], responses={200: s.FailureRouteOut(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None)  # every route at once, as a list
    def routing(self, request, pk=None):
        """Every failure of the requirement, where the classifier sent it, and the trace of rules (oldest first)."""
        requirement = get_object_or_404(selectors.requirements_visible_to(request.user), pk=pk)
        filters = {k: v for k, v in request.query_params.items() if k != api_settings.URL_FORMAT_OVERRIDE}
        query = s.RoutingQueryIn(data=filters)  # ?format= is DRF's own (the renderer), not a filter
        query.is_valid(raise_exception=True)
        routes = requirement.failure_routes.select_related("step").filter(**query.validated_data)
        return Response(s.FailureRouteOut(routes, many=True).data)

    @extend_schema(request=s.RetriageIn, responses={200: s.RequirementOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def retriage(self, request, pk=None):
        """Override the Product Owner's triage (reviewers and admins): run another playbook, clarified again under
        it; 409 while the triage runs and once design or planning has started."""
        requirement = get_object_or_404(selectors.requirements_visible_to(request.user), pk=pk)
        data = s.RetriageIn(data=request.data)
        data.is_valid(raise_exception=True)
        requirement_retriage(requirement_id=requirement.pk, actor=Actor.human(request.user, "api"),
                             origin=request_origin(request), **data.validated_data)
        return Response(s.RequirementOut(self.get_queryset().get(pk=requirement.pk),
                                         context=self.get_serializer_context()).data)

    @extend_schema(request=s.CancelIn, responses={200: s.RequirementOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        """Cancel the requirement (its reviewers and admins, or its submitter): every waiting review task expires
        and no further step starts; 409 once it is deployed or cancelled."""
        requirement = get_object_or_404(selectors.requirements_visible_to(request.user), pk=pk)
        data = s.CancelIn(data=request.data)
        data.is_valid(raise_exception=True)
        requirement_cancel_request(requirement_id=requirement.pk, actor=Actor.human(request.user, "api"),
                                   origin=request_origin(request), **data.validated_data)
        return Response(s.RequirementOut(self.get_queryset().get(pk=requirement.pk),
                                         context=self.get_serializer_context()).data)

    @extend_schema(request=s.ReplayIn, responses={202: s.RequirementOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def replay(self, request, pk=None):
        """Replay this finished or failed run from its recordings as a new requirement (409 while it still runs);
        the replay's `replay` field holds the comparison once it comes to rest."""
        source = get_object_or_404(selectors.requirements_visible_to(request.user), pk=pk)
        s.ReplayIn(data=request.data).is_valid(raise_exception=True)
        replay = replay_start(source_id=source.pk, user=request.user, via="api")
        replayed = s.RequirementOut(Requirement.objects.get(pk=replay.pk), context=self.get_serializer_context())
        return Response(replayed.data, status=status.HTTP_202_ACCEPTED)


@extend_schema_view(list=extend_schema(parameters=[OpenApiParameter(
    "state", str, enum=["open", *(v for v in ReviewState.values if v != "open")],
    description="open: still to decide (open, claimed or escalated); else one state")]))
class ReviewTaskViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = s.ReviewTaskOut
    submission_actions = ("decision",)

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ReviewTask.objects.none()
        tasks = selectors.review_tasks_visible_to(self.request.user).select_related("decided_by", "assignee", "assignee_group")
        wanted = self.request.query_params.get("state") if self.action == "list" else None  # a filter of the list only
        if wanted == "open":
            return tasks.filter(state__in=PENDING_REVIEW_STATES)
        if wanted:
            if wanted not in ReviewState.values:
                raise DomainError(f"unknown state; use open or one of {', '.join(ReviewState.values)}", "state")
            return tasks.filter(state=wanted)
        return tasks

    @extend_schema(request=s.DecisionIn, responses={200: s.ReviewTaskOut, 409: OpenApiResponse(s.ErrorOut, description=(
        "decided already (`code` illegal_transition), or its stories were edited since the `stories_version` sent "
        "(`code` stories_changed): nothing was decided"))})
    @action(detail=True, methods=["post"])
    def decision(self, request, pk=None):
        """Decide the task; approving a stories approval needs the `stories_version` its stories were read at."""
        task = get_object_or_404(self.get_queryset(), pk=pk)
        data = s.DecisionIn(data=request.data)
        data.is_valid(raise_exception=True)
        decided = review_decide(task_id=task.pk, actor=Actor.human(request.user, "api"), origin=request_origin(request),
                                version_required=True, **data.validated_data)
        return Response(s.ReviewTaskOut(decided).data)

    @extend_schema(request=None, responses={200: s.ReviewTaskOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def claim(self, request, pk=None):
        """Take the task to work on (409 while someone else holds it)."""
        task = get_object_or_404(self.get_queryset(), pk=pk)
        claimed = review_claim(task_id=task.pk, actor=Actor.human(request.user, "api"), origin=request_origin(request))
        return Response(s.ReviewTaskOut(claimed).data)

    @extend_schema(request=None, responses={200: s.ReviewTaskOut, 409: CONFLICT})
    @action(detail=True, methods=["post"])
    def unassign(self, request, pk=None):
        """Put the task back in the open pool."""
        task = get_object_or_404(self.get_queryset(), pk=pk)
        released = review_unassign(task_id=task.pk, actor=Actor.human(request.user, "api"), origin=request_origin(request))
        return Response(s.ReviewTaskOut(released).data)


class ProjectViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The projects of the user's organizations; their admins change what the API lets them change (PATCH)."""

    serializer_class = s.ProjectOut
    parser_classes = [BoundedJSONParser]  # a JSON true or false: a form field is a string, never a boolean

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Project.objects.none()
        return with_autonomous_deployments(selectors.projects_visible_to(self.request.user))

    @extend_schema(request=s.ProjectIn, responses={200: s.ProjectOut, 403: OpenApiResponse(
        s.ErrorOut, description="not an admin of the project's organization")})
    def partial_update(self, request, pk=None):
        """Grant or withdraw the project's pre-authorization of deployments (autonomous_deployments)."""
        project = get_object_or_404(self.get_queryset(), pk=pk)
        data = s.ProjectIn(data=request.data)
        data.is_valid(raise_exception=True)
        project_set_autonomous_deployments(project_id=project.pk, user=request.user,
                                           enabled=data.validated_data["autonomous_deployments"])
        return Response(s.ProjectOut(self.get_queryset().get(pk=project.pk)).data)
