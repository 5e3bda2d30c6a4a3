"""Checks that a run which ends by pushing to the Hub can push, made before training rather than after it."""

from __future__ import annotations

import concurrent.futures
import os

from huggingface_hub import HfApi, get_token
from huggingface_hub.constants import HF_HUB_OFFLINE

from ..inputs.errors import UserInputError

_TIMEOUT_S = 20


class HubAccessError(UserInputError):
    """`push_to_hub` is set but the Hub cannot be reached with a usable token."""


def check_hub_access(token: str | None = None) -> str:
    """Return the Hub user name, or raise `HubAccessError` saying why a push at the end would fail."""
    hint = "Set `push_to_hub: false`, or fix this before training so that no trained model is left unpushed."
    if HF_HUB_OFFLINE or os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise HubAccessError(f"`push_to_hub` is set but HF_HUB_OFFLINE is on, so nothing can be pushed. {hint}")
    token = token or get_token()
    if not token:
        raise HubAccessError(
            "`push_to_hub` is set but no Hugging Face token was found (`hub_token`, HF_TOKEN, or "
            f"`hf auth login`). {hint}"
        )
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        whoami = pool.submit(HfApi().whoami, token=token).result(timeout=_TIMEOUT_S)
    except concurrent.futures.TimeoutError as err:
        raise HubAccessError(f"`push_to_hub` is set but the Hub did not answer within {_TIMEOUT_S} s. {hint}") from err
    except Exception as err:  # network errors, invalid tokens: all mean the push would fail
        raise HubAccessError(
            f"`push_to_hub` is set but the Hub rejected or could not check the token: {err}. {hint}"
        ) from err
    finally:
        pool.shutdown(wait=False)
    return whoami.get("name", "")
