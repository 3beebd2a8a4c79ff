"""The adapters keep `import deniable` light: no pandas, PySpark, scikit-learn or datasets."""

from __future__ import annotations

import subprocess
import sys


def test_core_and_adapter_packages_import_no_third_party_data_tools():
    code = (
        "import sys, deniable, deniable.integrations, deniable.integrations.keyed, deniable.integrations.shipping, deniable.spark;"
        "print(sorted(m for m in ('pandas', 'pyspark', 'sklearn', 'datasets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_extra_names_the_install_command(monkeypatch):
    import pytest

    from deniable.integrations._common import require

    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark -> ImportError
    with pytest.raises(ImportError, match=r'pip install "deniable\[spark\]"'):
        require("pyspark", purpose="deniable.spark")
