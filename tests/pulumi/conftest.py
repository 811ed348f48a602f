import sys
from pathlib import Path

PULUMI_PROJECT = Path(__file__).resolve().parents[2] / "pulumi"
if str(PULUMI_PROJECT) not in sys.path:
    sys.path.insert(0, str(PULUMI_PROJECT))
