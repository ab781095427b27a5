{# Hard deletes: compare the source's full key list (keys only, staged with COPY) with
   the dimension's live keys. Missing keys get a tombstone at the run's upper bound (or
   just after their newest version, if that is later). #}
-- statement: keys_table
CREATE TEMP TABLE dimlog_source_keys (
{% for c in key_defs %}
    {{ c.name }} {{ c.target_type }}{{ "," if not loop.last or deleted_flag }}
{% endfor %}
{% if deleted_flag %}
    dimlog_live boolean
{% endif %}
)
-- statement: analyze
ANALYZE dimlog_source_keys
{# The two sides compared in one pass: a full join of the dimension's current keys with
   the source's live keys (gone, or flagged deleted where no window reads them, is not
   live) keeps the keys one side lacks. Two anti-joins built a hash of a million keys
   each; this builds one (a third of reconciliation's time at 1M keys). #}
{# The key diff is a merge join: the dimension's current keys come in key order from its
   key index and the key list is sorted once. A hash join of ten million keys on each
   side spills its batches to disk and misses the CPU's caches on every probe, more so
   the more memory it is given: 14.8 s against 8.5 s at 10M keys (0.72 s against 1.3 s
   at 1M). A full join can only be a hash or a merge join, so turning hash joins off for
   this one statement leaves the merge, whichever way each side is ordered. (A session
   setting: reconciliation runs before the load's transaction opens, and `key_diff_done`
   puts it back.) #}
-- statement: key_diff_by_merge
SET enable_hashjoin = off
-- statement: key_diff
CREATE TEMP TABLE dimlog_key_diff AS
SELECT {% for k in keys %}dimlog_d.{{ k }} AS dimlog_d{{ loop.index }}, {% endfor %}dimlog_d.valid_from, dimlog_d.dimlog_in_dim,
       {% for k in keys %}dimlog_s.{{ k }} AS dimlog_s{{ loop.index }}, {% endfor %}dimlog_s.dimlog_in_source
FROM (SELECT {{ keys|cols }}, valid_from, true AS dimlog_in_dim FROM {{ dim }} WHERE is_current) dimlog_d
FULL JOIN (SELECT {{ keys|cols }}, true AS dimlog_in_source FROM dimlog_source_keys{% if deleted_flag %} WHERE dimlog_live{% endif %}) dimlog_s
  ON {{ keys|eqs("dimlog_s", "dimlog_d") }}
WHERE dimlog_d.dimlog_in_dim IS NULL OR dimlog_s.dimlog_in_source IS NULL
{# Missing: current in the dimension, not live in the source, and not in this load. #}
-- statement: key_diff_done
RESET enable_hashjoin
-- statement: missing
CREATE TEMP TABLE dimlog_missing AS
SELECT {% for k in keys %}dimlog_d{{ loop.index }} AS {{ k }}, {% endfor %}valid_from
FROM dimlog_key_diff
WHERE dimlog_in_source IS NULL
  AND ({% for k in keys %}dimlog_d{{ loop.index }}{{ ", " if not loop.last }}{% endfor %}) NOT IN (SELECT {{ keys|cols }} FROM dimlog_stage)
{# Source keys held live that are neither live in the dimension nor in this load:
   stamped behind every window (restored from a backup, or inserted with an old stamp).
   Their rows are read again and loaded; a deleted key among them is revived. The staged
   keys are taken away with EXCEPT, a set operation: an anti-join against the unanalysed
   stage was planned as a nested loop (13 s for 20k restored keys). #}
-- statement: unseen
CREATE TEMP TABLE dimlog_unseen AS
SELECT {% for k in keys %}dimlog_s{{ loop.index }} AS {{ k }}{{ ", " if not loop.last }}{% endfor %}
FROM dimlog_key_diff
WHERE dimlog_in_dim IS NULL
EXCEPT
SELECT {{ keys|cols }} FROM dimlog_stage
-- statement: unseen_count
SELECT count(*)::text FROM dimlog_unseen
-- statement: missing_count
SELECT count(*)::text FROM dimlog_missing
{# Live keys, counted only as far as the mass-delete guard needs: past the limit the
   guard cannot trip, so a run closing a few keys does not count the whole dimension. #}
-- statement: live_count
SELECT count(*)::text FROM (SELECT 1 FROM {{ dim }} WHERE is_current LIMIT $1) dimlog_live
-- statement: tombstones
INSERT INTO dimlog_stage ({{ keys|cols }}, valid_from, is_deleted)
SELECT {{ keys|cols }}, GREATEST($1::timestamptz, {{ "valid_from"|next_micro }}), true
FROM dimlog_missing
-- statement: late_missing
SELECT 0 WHERE FALSE
-- statement: key_index
{# Not needed on this engine: PostgreSQL hashes the key list; `analyze` gives the planner its size. #}
{# A key whose soft-delete flag spells neither true nor false (its `dimlog_live` is NULL). #}
-- statement: flag_neither
SELECT {% for c in key_defs %}CAST({{ c.name }} AS TEXT){{ ", " if not loop.last }}{% endfor %}
FROM dimlog_source_keys WHERE dimlog_live IS NULL LIMIT 1
