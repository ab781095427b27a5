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
) ON COMMIT DROP
-- statement: analyze
ANALYZE dimlog_source_keys
-- statement: missing
CREATE TEMP TABLE dimlog_missing ON COMMIT DROP AS
SELECT {{ keys|cols("d") }}, d.valid_from
FROM {{ dim }} d
WHERE d.is_current
  AND NOT EXISTS (SELECT 1 FROM dimlog_source_keys s WHERE {{ keys|eqs("s", "d") }})
  AND ({{ keys|cols("d") }}) NOT IN (SELECT {{ keys|cols }} FROM dimlog_stage)
{# Source keys held live that are neither live in the dimension nor in this load:
   stamped behind every window (restored from a backup, or inserted with an old stamp).
   Their rows are read again and loaded; a deleted key among them is revived. #}
-- statement: unseen
CREATE TEMP TABLE dimlog_unseen ON COMMIT DROP AS
SELECT DISTINCT {{ keys|cols("s") }}
FROM dimlog_source_keys s
WHERE {% if deleted_flag %}s.dimlog_live AND {% endif %}NOT EXISTS (SELECT 1 FROM {{ dim }} d WHERE {{ keys|eqs("d", "s") }} AND d.is_current)
  AND NOT EXISTS (SELECT 1 FROM dimlog_stage g WHERE {{ keys|eqs("g", "s") }})
-- statement: unseen_count
SELECT count(*)::text FROM dimlog_unseen
-- statement: missing_count
SELECT count(*)::text FROM dimlog_missing
{# Live keys, counted only as far as the mass-delete guard needs: past the limit the
   guard cannot trip, so a run closing a few keys does not count the whole dimension. #}
-- statement: live_count
SELECT count(*)::text FROM (SELECT 1 FROM {{ dim }} WHERE is_current LIMIT $1) live
-- statement: tombstones
INSERT INTO dimlog_stage ({{ keys|cols }}, valid_from, is_deleted)
SELECT {{ keys|cols }}, GREATEST($1::timestamptz, valid_from + interval '1 microsecond'), true
FROM dimlog_missing
-- statement: late_missing
SELECT 0 WHERE FALSE
