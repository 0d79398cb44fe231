"""A long-lived random cookie naming the browser, for the referral fraud rule (an invitee in
the referrer's browser is held for review). It identifies a browser, never a person."""

import secrets

BROWSER_COOKIE = "gp_bid"
BROWSER_COOKIE_MAX_AGE = 400 * 24 * 3600  # browsers cap cookies at about 400 days


def browser_id(request) -> str:
    value = request.COOKIES.get(BROWSER_COOKIE, "")
    return value if len(value) <= 64 and value.isascii() else ""


class BrowserIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not browser_id(request):
            # Set on the request too, so a sign-up in this very request is tied to it.
            request.COOKIES[BROWSER_COOKIE] = secrets.token_urlsafe(16)
            request._new_browser_id = True
        response = self.get_response(request)
        if getattr(request, "_new_browser_id", False) and not request.path.startswith("/api/"):
            response.set_cookie(
                BROWSER_COOKIE, request.COOKIES[BROWSER_COOKIE], max_age=BROWSER_COOKIE_MAX_AGE,
                httponly=True, samesite="Lax", secure=request.is_secure(),
            )  # fmt: skip
        return response
