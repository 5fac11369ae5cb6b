"""tests/admin/test_tenant_purge_race.py against the Citus cluster."""

import pytest

from tests.admin import test_tenant_purge_race as on_single_node
from tests.citus.lifecycle import collected_again

pytestmark = pytest.mark.citus

globals().update(collected_again(on_single_node))
