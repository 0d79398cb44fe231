from __future__ import annotations

from django.urls import reverse
from rest_framework import serializers

from credits.actions.campaigns import terms_errors
from credits.models import Campaign, LedgerEntry


class EntrySerializer(serializers.ModelSerializer):
    amount = serializers.IntegerField(help_text="Signed, in credits (RTX 4090 GPU-seconds): grants +, spends -")

    class Meta:
        model = LedgerEntry
        fields = ["id", "kind", "amount", "created_at", "expires_at", "grant_kind", "gpu_type", "covered_gpu_seconds"]


class CampaignSerializer(serializers.ModelSerializer):
    link = serializers.SerializerMethodField()
    closed_reason = serializers.SerializerMethodField()

    class Meta:
        model = Campaign
        fields = [
            "id", "name", "code", "start", "end", "budget_gpu_seconds", "signup_gpu_seconds", "tutorial_gpu_seconds",
            "referral_gpu_seconds", "per_referrer_cap", "granted_gpu_seconds", "link", "closed_reason",
            "needs_approval", "approved_at",
        ]  # fmt: skip
        read_only_fields = ["id", "granted_gpu_seconds", "link", "closed_reason", "needs_approval", "approved_at"]

    def get_link(self, campaign) -> str:
        request = self.context.get("request")
        path = reverse("credits:landing", args=[campaign.code])
        return request.build_absolute_uri(path) if request else path

    def get_closed_reason(self, campaign) -> str:
        return campaign.closed_reason()

    def validate(self, attrs):
        start, end = attrs.get("start"), attrs.get("end")
        if start and end and end <= start:
            raise serializers.ValidationError({"end": ["must be after start"]})
        errors = terms_errors(attrs)
        if errors:
            raise serializers.ValidationError({name: [message] for name, message in errors.items()})
        return attrs
