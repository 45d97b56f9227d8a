"""gpu.rst needs SCIPY_ARRAY_API=1 before scipy is imported: tests/test_array_api_env.py runs it then."""

import os

collect_ignore = [] if os.environ.get("SCIPY_ARRAY_API") == "1" else ["gpu.rst"]
