from allauth.account.signals import user_signed_up
from django.conf import settings
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from accounts.models import Profile


@receiver(post_save, sender=settings.AUTH_USER_MODEL)
def create_profile(sender, instance, created, **kwargs):
    if created:
        Profile.objects.get_or_create(user=instance)


@receiver(user_signed_up)
def provision_new_user(sender, request, user, **kwargs):
    from accounts.tasks import provision_user

    profile_id = user.profile.pk
    transaction.on_commit(lambda: provision_user.delay(profile_id))
