-- A bench row's warnings become a list: the column holds a JSON array of texts (each
-- one warning's readable text) instead of the texts joined with "; ". No warning's
-- text contains "; ", so splitting the stored rows on it recovers each warning.
UPDATE bench_results SET warnings = (
    WITH RECURSIVE part(i, item, rest) AS (
        SELECT 0, NULL, CASE WHEN bench_results.warnings = '' THEN '' ELSE bench_results.warnings || '; ' END
        UNION ALL
        SELECT i + 1, substr(rest, 1, instr(rest, '; ') - 1), substr(rest, instr(rest, '; ') + 2)
        FROM part WHERE rest <> ''
    )
    SELECT json_group_array(item) FROM (SELECT item FROM part WHERE i > 0 ORDER BY i)
)
WHERE (CASE WHEN json_valid(warnings) THEN json_type(warnings) END) IS NOT 'array';
