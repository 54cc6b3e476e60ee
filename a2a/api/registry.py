"""Public discovery endpoints: the skill catalogue and the AgentCards.

No authentication: agents download skills before they have a key, and A2A clients read
cards before they call. An invalid ``Authorization`` header is ignored here, not refused.
"""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, permissions
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from a2a import cards
from agent_profiles.api.serializers import SkillSerializer
from agent_profiles.models import AgentProfile, AgentStatus, Skill
from platform_site.errors import NotFound


class PublicView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [permissions.AllowAny]


class SkillListView(PublicView, generics.ListAPIView):
    """All active skills, with their input and output JSON Schemas (a plain array).

    Optional exact-match filters: ``?domain=``, ``?subdomain=``, ``?tag=``.
    """

    serializer_class = SkillSerializer
    pagination_class = None

    def get_queryset(self) -> QuerySet[Skill]:
        skills = Skill.objects.filter(is_active=True).order_by("id")
        params = self.request.query_params
        for name in ("domain", "subdomain"):
            if params.get(name):
                skills = skills.filter(**{name: params[name]})
        tag = params.get("tag")
        if tag:
            # JSON containment is not on SQLite; the catalogue is small, filter in Python.
            ids = [s.pk for s in skills.only("id", "tags") if tag in (s.tags or [])]
            skills = skills.filter(pk__in=ids)
        return skills

    @extend_schema(
        operation_id="list_skills",
        tags=["registry"],
        parameters=[
            OpenApiParameter("domain", str, description="Only skills of this domain."),
            OpenApiParameter("subdomain", str, description="Only skills of this subdomain."),
            OpenApiParameter("tag", str, description="Only skills carrying this tag."),
        ],
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)


class PlatformCardView(PublicView):
    """The platform's own A2A 1.0 AgentCard."""

    @extend_schema(operation_id="platform_agent_card", responses=OpenApiTypes.OBJECT, tags=["a2a"])
    def get(self, request: Request) -> Response:
        return Response(cards.platform_card())


class AgentCardView(PublicView):
    """A registered agent's AgentCard, pointing at the platform's tenant routes."""

    @extend_schema(
        operation_id="agent_card",
        responses={200: OpenApiTypes.OBJECT, 404: OpenApiResponse(description="Unknown agent.")},
        tags=["a2a"],
    )
    def get(self, request: Request, agent_id: str) -> Response:
        # Only an approved agent has a card: a pending one's name and description are a
        # stranger's (self-registration), published here as the platform's.
        agent = AgentProfile.objects.filter(pk=agent_id, status=AgentStatus.ACTIVE).first()
        if agent is None:
            raise NotFound(f"No agent '{agent_id}' is registered.", {"agentId": agent_id})
        return Response(cards.agent_card(agent))
