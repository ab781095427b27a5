{# Whether the log is empty, from each shard's primary-key index (log_id first): an
   EXISTS over a distributed table is planned on the coordinator, pulling the whole log
   there to look at one row. #}
-- statement: is_empty
SELECT CASE WHEN max(log_id) IS NULL THEN '1' ELSE '0' END FROM {{ log }}
