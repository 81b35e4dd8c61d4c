-- +goose Up
-- Experiment phases: changing the weights keeps every unit in the arm it
-- was first given; re-randomising starts a new phase with a new seed, in
-- which units are assigned afresh and only the new phase's exposures and
-- feedback are analysed (GrowthBook's phases).
ALTER TABLE experiments ADD COLUMN phase integer NOT NULL DEFAULT 1 CHECK (phase >= 1),
    ADD COLUMN phase_started_at timestamptz,
    -- Weights changed within the phase: units assigned under the old ones
    -- keep their arm, so the sample-ratio check no longer applies.
    ADD COLUMN weights_changed boolean NOT NULL DEFAULT false;

ALTER TABLE experiment_exposures ADD COLUMN phase integer NOT NULL DEFAULT 1;
ALTER TABLE experiment_exposures DROP CONSTRAINT experiment_exposures_pkey;
ALTER TABLE experiment_exposures ADD PRIMARY KEY (experiment_id, phase, unit_id);

-- +goose Down
DELETE FROM experiment_exposures WHERE phase > 1;
ALTER TABLE experiment_exposures DROP CONSTRAINT experiment_exposures_pkey;
ALTER TABLE experiment_exposures ADD PRIMARY KEY (experiment_id, unit_id);
ALTER TABLE experiment_exposures DROP COLUMN phase;
ALTER TABLE experiments DROP COLUMN weights_changed, DROP COLUMN phase_started_at, DROP COLUMN phase;
