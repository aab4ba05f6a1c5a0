-- +goose Up
-- A credential for a host's hf source (issue 18), sealed with the master
-- key like api_key; '' when the host has none. It is delivered only in
-- that host's /vllm/config and never shown by the admin API.
ALTER TABLE hosts ADD COLUMN hf_token TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE hosts DROP COLUMN hf_token;
