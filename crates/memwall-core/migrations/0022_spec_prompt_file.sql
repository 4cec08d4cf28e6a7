-- Speculative rows name their prompt file.
--
-- spec_gates, spec_bench, spec_synth: prompt_set, the prompt file a gate covered or a
-- bench measured, as given (a path, or `builtin:prompts/spec.jsonl` for the frozen
-- set). Which rows a gate unlocks is still decided by prompt_set_sha256 (a gate
-- unlocks benches of the file whose bytes it covered, whatever the file is called);
-- this column says which file that was. Rows stored before it have NULL: unknown.
ALTER TABLE spec_gates ADD COLUMN prompt_set TEXT;
ALTER TABLE spec_bench ADD COLUMN prompt_set TEXT;
ALTER TABLE spec_synth ADD COLUMN prompt_set TEXT;
