from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.actions import plan_choice
from accounts.models import ApiToken, TooManyTokens


@login_required
def api_tokens(request):
    new_key = None
    if request.method == "POST":
        name = request.POST.get("name", "").strip()[:64]
        if not name:
            messages.error(request, "Give the token a name, e.g. the machine that will use it.")
        else:
            try:
                _token, new_key = ApiToken.issue(request.user, name)
            except TooManyTokens as exc:
                messages.error(request, str(exc))
    tokens = ApiToken.objects.filter(user=request.user)
    return render(request, "accounts/api_tokens.html", {"tokens": tokens, "new_key": new_key})


@login_required
@require_POST
def revoke_api_token(request, pk: int):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    messages.success(request, f"Token {token.name} revoked.")
    return redirect("accounts:api_tokens")


@login_required
def plan(request):
    """The user's plan, the plans offered, and switch / pause / resume (accounts.actions.plan_choice)."""
    if request.method == "POST":
        action, code = request.POST.get("action", ""), request.POST.get("plan", "")
        try:
            started = plan_choice.choose(request.user, action, code)
        except plan_choice.PlanChoiceError as exc:
            messages.error(request, exc.message)
        else:
            word = {"switch": "You are now on", "pause": "Paused:", "resume": "Resumed:"}[action]
            messages.success(
                request,
                f"{word} {started.plan.name}. Billed so from {plan_choice.takes_effect():%-d %B %Y} "
                "(a day is billed to every plan held at any moment of it).",
            )
        return redirect("accounts:plan")
    context = {"standing": plan_choice.standing(request.user), "changes_per_day": settings.PLAN_CHANGES_PER_DAY}
    return render(request, "accounts/plan.html", context)
