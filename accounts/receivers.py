"""Model signals that route account changes made anywhere (sign-up, Django admin, shell)
through accounts/actions/lifecycle.py. Admin views set `instance._audit_actor` so the audit log
names who acted; changes made by `QuerySet.update()` (the lifecycle's own) send no signal."""

from allauth.account.signals import user_logged_in, user_signed_up
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_save, pre_delete, pre_save
from django.dispatch import receiver

from accounts import oidc
from accounts.actions import lifecycle
from accounts.models import Profile
from accounts.tasks import provision_user


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def create_profile(sender, instance, created, raw=False, **kwargs):
    if created and not raw:
        Profile.objects.get_or_create(user=instance)
        lifecycle.start_default_subscription(instance)


@receiver(user_signed_up)
def provision_new_user(sender, request, user, **kwargs):
    profile_id = user.profile.pk
    transaction.on_commit(lambda: provision_user.delay(profile_id))


@receiver(pre_save, sender=settings.AUTH_USER_MODEL)
def remember_was_active(sender, instance, update_fields=None, raw=False, **kwargs):
    if raw or instance.pk is None or (update_fields is not None and "is_active" not in update_fields):
        return
    instance._was_active = sender.objects.filter(pk=instance.pk).values_list("is_active", flat=True).first()


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def follow_active_change(sender, instance, created, raw=False, **kwargs):
    was_active = instance.__dict__.pop("_was_active", None)
    if created or raw or was_active is None or was_active == instance.is_active:
        return
    actor = getattr(instance, "_audit_actor", None)
    if instance.is_active:
        lifecycle.after_reactivation(instance.pk, actor)
    else:
        lifecycle.after_deactivation(instance.pk, actor)


@receiver(pre_delete, sender=settings.AUTH_USER_MODEL)
def follow_deletion(sender, instance, **kwargs):
    lifecycle.before_deletion(instance, getattr(instance, "_audit_actor", None))


@receiver(post_save, sender=Profile)
def follow_role_change(sender, instance, created, raw=False, **kwargs):
    before = instance.loaded_terms
    instance.loaded_terms = instance.current_terms()
    if created or raw or before is None or before == instance.loaded_terms:
        return
    lifecycle.after_profile_change(instance, before, getattr(instance, "_audit_actor", None))


@receiver(user_logged_in)
def remember_provider_sign_in(sender, request, user, sociallogin=None, **kwargs):
    """A session that began at the institution's provider ends there too (accounts/oidc.py)."""
    if sociallogin is not None and request is not None:
        request.session[oidc.SESSION_KEY] = sociallogin.account.provider
