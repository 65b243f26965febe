-- New-user cohort over OMOP CDM v5.4, the same at every hospital: one row per subject.
-- Index: a person's first type 2 diabetes diagnosis (201826), with a year of observation before and after it.
-- Covariates at index: age, sex, hypertension (320128) and chronic kidney disease (46271022) before
-- it, the latest HbA1c (3004410) in the year before it. Treatment: metformin (1503297) started within
-- 30 days of the index. Outcome: a myocardial infarction (4329847) in the 365 days after the index.
WITH index_event AS (
    SELECT person_id, MIN(condition_start_date) AS index_date
    FROM condition_occurrence
    WHERE condition_concept_id = 201826
    GROUP BY person_id
),
eligible AS (
    SELECT i.person_id, i.index_date
    FROM index_event i
    JOIN observation_period op
      ON op.person_id = i.person_id
     AND i.index_date - op.observation_period_start_date >= 365
     AND op.observation_period_end_date - i.index_date >= 365
),
hba1c AS (
    SELECT DISTINCT ON (m.person_id) m.person_id, m.value_as_number
    FROM measurement m
    JOIN eligible e ON e.person_id = m.person_id
    WHERE m.measurement_concept_id = 3004410
      AND m.value_as_number IS NOT NULL
      AND m.measurement_date BETWEEN e.index_date - 365 AND e.index_date
    ORDER BY m.person_id, m.measurement_date DESC
)
SELECT
    p.person_source_value AS subject_id,
    EXTRACT(YEAR FROM e.index_date)::integer - p.year_of_birth AS age_at_index,
    CASE WHEN p.gender_concept_id = 8507 THEN 1 ELSE 0 END AS male,
    EXISTS (
        SELECT 1 FROM condition_occurrence c
        WHERE c.person_id = e.person_id AND c.condition_concept_id = 320128 AND c.condition_start_date < e.index_date
    )::integer AS prior_hypertension,
    EXISTS (
        SELECT 1 FROM condition_occurrence c
        WHERE c.person_id = e.person_id AND c.condition_concept_id = 46271022 AND c.condition_start_date < e.index_date
    )::integer AS prior_ckd,
    h.value_as_number AS hba1c,
    EXISTS (
        SELECT 1 FROM drug_exposure d
        WHERE d.person_id = e.person_id AND d.drug_concept_id = 1503297
          AND d.drug_exposure_start_date BETWEEN e.index_date AND e.index_date + 30
    )::integer AS metformin,
    EXISTS (
        SELECT 1 FROM condition_occurrence c
        WHERE c.person_id = e.person_id AND c.condition_concept_id = 4329847
          AND c.condition_start_date BETWEEN e.index_date + 1 AND e.index_date + 365
    )::integer AS mi_within_1y
FROM eligible e
JOIN person p ON p.person_id = e.person_id
JOIN hba1c h ON h.person_id = e.person_id
