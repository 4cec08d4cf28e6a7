-- One name for one thing (issue 40 §4): the drafter's identity (`draft:<sha256 prefix>`,
-- `ngram:1-3`) is `drafter_key` in spec_gates and spec_bench, and was `draft_key` in the
-- set-acceptance tables. SQLite (≥ 3.26) rewrites the triggers that name the column.
ALTER TABLE spec_synth_predictions RENAME COLUMN draft_key TO drafter_key;
ALTER TABLE spec_synth RENAME COLUMN draft_key TO drafter_key;
