"""Sign-in for the standalone server (``pgbus-web serve``): a users file
with Argon2 hashes, a sign-in form with a session cookie, HTTP Basic for
scripts, or a trusted auth proxy's header; viewers and operators. Wired into
the app through the blueprint's can_view/can_act/actor_name hooks
(standalone.py); the blueprint itself never imports this package.
"""

from .standalone import Auth, Identity, with_hooks
from .users import OPERATOR, ROLES, VIEWER, User, UsersFile, UsersFileError

__all__ = ["Auth", "Identity", "OPERATOR", "ROLES", "User", "UsersFile", "UsersFileError", "VIEWER", "with_hooks"]
