"""Who may see which page. Admin and marketing pages answer 403 to everyone else."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

from accounts.models import Role


def user_role(user) -> str | None:
    if not user.is_authenticated:
        return None
    profile = getattr(user, "profile", None)
    return profile.role if profile else Role.USER


def is_admin(user) -> bool:
    """Whether `user` (anonymous or not) is one of the pool's admins."""
    return user_role(user) == Role.ADMIN


def role_required(*roles: str):
    def decorator(view):
        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if user_role(request.user) not in roles:
                raise PermissionDenied("This page is not available to your account.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator
