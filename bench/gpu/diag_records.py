import sys
from xaibench.results import records
df = records(sys.argv[1] + "/.xaibench", curves=False)
df["na_reason"] = df["na_reason"].astype(str).str.slice(0, 400)
print(df[["track", "explainer", "metric", "value", "na_reason"]].drop_duplicates(["track", "explainer", "metric", "na_reason"]).to_string())
