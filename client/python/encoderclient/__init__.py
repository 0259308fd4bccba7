"""Deprecated: the package is now `encoder_client`. This alias re-exports
it, so that `import encoderclient` and `from encoderclient import
EncoderClient` keep working; it will be removed in a later release."""

import warnings

from encoder_client import *  # noqa: F401,F403
from encoder_client import __all__, __version__  # noqa: F401
from encoder_client import _stubs  # noqa: F401  (as encoderclient had)

warnings.warn("the encoderclient package is now encoder_client; "
              "import encoder_client instead",
              DeprecationWarning, stacklevel=2)
