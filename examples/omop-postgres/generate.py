"""Write a small synthetic OMOP CDM v5.4 database per hospital into a PostgreSQL server.

Each hospital is its own database (``omop_hospital_a``, ``omop_hospital_b``) holding the CDM tables
the cohort reads (``person``, ``observation_period``, ``condition_occurrence``, ``drug_exposure``,
``measurement``, with the v5.4 columns) and the few ``concept`` rows they use, all standard OHDSI
concept ids. A login role ``omop_reader`` (password from ``$OMOP_PASSWORD``) may only SELECT.

The data (seeded): people with type 2 diabetes (201826) diagnosed inside an observation period;
hypertension (320128) and chronic kidney disease (46271022) before it for some; an HbA1c
measurement (3004410, %) in the year before the diagnosis; metformin (1503297) started within 30
days of the diagnosis more often for younger people with a higher HbA1c and no kidney disease
(confounding); a myocardial infarction (4329847) within a year, whose risk rises with age,
hypertension, kidney disease and HbA1c and falls by 4 percentage points with metformin (the
synthetic truth the study should recover, up to sampling error). Hospital B's patients are older.

Usage (the server's superuser password in ``$PGPASSWORD``, libpq's variable)::

    OMOP_PASSWORD=... PGPASSWORD=... python generate.py --host 127.0.0.1 --port 5432 --user postgres
"""

from __future__ import annotations

import argparse
import os
from datetime import date, timedelta

import numpy as np
import psycopg
from psycopg import sql

HOSPITALS = {"omop_hospital_a": (1_500, 58.0), "omop_hospital_b": (1_200, 64.0)}  # database: (people, mean age)
READER = "omop_reader"
EHR = 32817  # type concept "EHR"
CONCEPTS = [
    (8507, "MALE", "Gender", "Gender", "Gender", "M"),
    (8532, "FEMALE", "Gender", "Gender", "Gender", "F"),
    (201826, "Type 2 diabetes mellitus", "Condition", "SNOMED", "Clinical Finding", "44054006"),
    (320128, "Essential hypertension", "Condition", "SNOMED", "Clinical Finding", "59621000"),
    (46271022, "Chronic kidney disease", "Condition", "SNOMED", "Clinical Finding", "709044004"),
    (4329847, "Myocardial infarction", "Condition", "SNOMED", "Clinical Finding", "22298006"),
    (1503297, "metformin", "Drug", "RxNorm", "Ingredient", "6809"),
    (3004410, "Hemoglobin A1c/Hemoglobin.total in Blood", "Measurement", "LOINC", "Lab Test", "4548-4"),
    (8554, "percent", "Unit", "UCUM", "Unit", "%"),
    (EHR, "EHR", "Type Concept", "Type Concept", "Type Concept", "OMOP4976890"),
]

DDL = """
CREATE TABLE concept (
    concept_id integer NOT NULL PRIMARY KEY, concept_name varchar(255) NOT NULL, domain_id varchar(20) NOT NULL,
    vocabulary_id varchar(20) NOT NULL, concept_class_id varchar(20) NOT NULL, standard_concept varchar(1),
    concept_code varchar(50) NOT NULL, valid_start_date date NOT NULL, valid_end_date date NOT NULL,
    invalid_reason varchar(1));
CREATE TABLE person (
    person_id integer NOT NULL PRIMARY KEY, gender_concept_id integer NOT NULL, year_of_birth integer NOT NULL,
    month_of_birth integer, day_of_birth integer, birth_datetime timestamp, race_concept_id integer NOT NULL,
    ethnicity_concept_id integer NOT NULL, location_id integer, provider_id integer, care_site_id integer,
    person_source_value varchar(50), gender_source_value varchar(50), gender_source_concept_id integer,
    race_source_value varchar(50), race_source_concept_id integer, ethnicity_source_value varchar(50),
    ethnicity_source_concept_id integer);
CREATE TABLE observation_period (
    observation_period_id integer NOT NULL PRIMARY KEY, person_id integer NOT NULL,
    observation_period_start_date date NOT NULL, observation_period_end_date date NOT NULL,
    period_type_concept_id integer NOT NULL);
CREATE TABLE condition_occurrence (
    condition_occurrence_id integer NOT NULL PRIMARY KEY, person_id integer NOT NULL,
    condition_concept_id integer NOT NULL, condition_start_date date NOT NULL, condition_start_datetime timestamp,
    condition_end_date date, condition_end_datetime timestamp, condition_type_concept_id integer NOT NULL,
    condition_status_concept_id integer, stop_reason varchar(20), provider_id integer, visit_occurrence_id integer,
    visit_detail_id integer, condition_source_value varchar(50), condition_source_concept_id integer,
    condition_status_source_value varchar(50));
CREATE TABLE drug_exposure (
    drug_exposure_id integer NOT NULL PRIMARY KEY, person_id integer NOT NULL, drug_concept_id integer NOT NULL,
    drug_exposure_start_date date NOT NULL, drug_exposure_start_datetime timestamp,
    drug_exposure_end_date date NOT NULL, drug_exposure_end_datetime timestamp, verbatim_end_date date,
    drug_type_concept_id integer NOT NULL, stop_reason varchar(20), refills integer, quantity numeric,
    days_supply integer, sig text, route_concept_id integer, lot_number varchar(50), provider_id integer,
    visit_occurrence_id integer, visit_detail_id integer, drug_source_value varchar(50),
    drug_source_concept_id integer, route_source_value varchar(50), dose_unit_source_value varchar(50));
CREATE TABLE measurement (
    measurement_id integer NOT NULL PRIMARY KEY, person_id integer NOT NULL, measurement_concept_id integer NOT NULL,
    measurement_date date NOT NULL, measurement_datetime timestamp, measurement_time varchar(10),
    measurement_type_concept_id integer NOT NULL, operator_concept_id integer, value_as_number numeric,
    value_as_concept_id integer, unit_concept_id integer, range_low numeric, range_high numeric,
    provider_id integer, visit_occurrence_id integer, visit_detail_id integer,
    measurement_source_value varchar(50), measurement_source_concept_id integer, unit_source_value varchar(50),
    unit_source_concept_id integer, value_source_value varchar(50), measurement_event_id bigint,
    meas_event_field_concept_id integer);
"""


def hospital_rows(n: int, mean_age: float, rng: np.random.Generator) -> dict[str, list[tuple]]:
    """Rows of the five CDM tables for ``n`` people (see the module docstring)."""
    day0 = date(2018, 1, 1)
    index = [day0 + timedelta(days=int(d)) for d in rng.integers(0, 4 * 365, n)]
    age = np.clip(rng.normal(mean_age, 10.0, n), 30, 90).round()
    male = rng.random(n) < 0.52
    hypertension = rng.random(n) < 1 / (1 + np.exp(-(age - 60) / 8))
    ckd = rng.random(n) < 0.08 + 0.15 * hypertension
    hba1c = np.clip(rng.normal(7.2 + 0.4 * hypertension, 1.1, n), 5.0, 13.0).round(1)
    p_metformin = 1 / (1 + np.exp(-(0.6 - 0.04 * (age - 60) + 0.5 * (hba1c - 7.2) - 1.5 * ckd)))
    metformin = rng.random(n) < p_metformin
    risk = np.clip(0.05 + 0.003 * (age - 60) + 0.05 * hypertension + 0.07 * ckd + 0.02 * (hba1c - 7.2), 0.01, 0.9)
    mi = rng.random(n) < np.clip(risk - 0.04 * metformin, 0.0, 1.0)
    rows: dict[str, list[tuple]] = {k: [] for k in ("person", "observation_period", "condition_occurrence",
                                                    "drug_exposure", "measurement")}

    def condition(pid: int, concept: int, day: date) -> None:
        rows["condition_occurrence"].append((len(rows["condition_occurrence"]) + 1, pid, concept, day, EHR))

    for i in range(n):
        pid, start = i + 1, index[i]
        rows["person"].append((pid, 8507 if male[i] else 8532, start.year - int(age[i]), 0, 0, f"H{pid:06d}"))
        obs_start = start - timedelta(days=int(rng.integers(400, 2000)))
        obs_end = start + timedelta(days=int(rng.integers(400, 1500)))
        rows["observation_period"].append((pid, pid, obs_start, obs_end, EHR))
        condition(pid, 201826, start)
        if hypertension[i]:
            condition(pid, 320128, start - timedelta(days=int(rng.integers(30, 365))))
        if ckd[i]:
            condition(pid, 46271022, start - timedelta(days=int(rng.integers(30, 365))))
        if mi[i]:
            condition(pid, 4329847, start + timedelta(days=int(rng.integers(1, 365))))
        if metformin[i]:
            first = start + timedelta(days=int(rng.integers(0, 30)))
            rows["drug_exposure"].append((pid, pid, 1503297, first, first + timedelta(days=90), EHR, 90))
        lab = start - timedelta(days=int(rng.integers(0, 300)))
        rows["measurement"].append((pid, pid, 3004410, lab, EHR, float(hba1c[i]), 8554))
    return rows


COLUMNS = {
    "person": "person_id, gender_concept_id, year_of_birth, race_concept_id, ethnicity_concept_id, person_source_value",
    "observation_period": "observation_period_id, person_id, observation_period_start_date,"
    " observation_period_end_date, period_type_concept_id",
    "condition_occurrence": "condition_occurrence_id, person_id, condition_concept_id, condition_start_date,"
    " condition_type_concept_id",
    "drug_exposure": "drug_exposure_id, person_id, drug_concept_id, drug_exposure_start_date,"
    " drug_exposure_end_date, drug_type_concept_id, days_supply",
    "measurement": "measurement_id, person_id, measurement_concept_id, measurement_date,"
    " measurement_type_concept_id, value_as_number, unit_concept_id",
}


def write_hospital(connect: dict, database: str, n: int, mean_age: float, seed: int) -> None:
    """(Re)create one hospital's database and fill it."""
    with psycopg.connect(**connect, dbname="postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
        admin.execute(f'CREATE DATABASE "{database}"')
    rows = hospital_rows(n, mean_age, np.random.default_rng(seed))
    with psycopg.connect(**connect, dbname=database) as db:
        db.execute(DDL)
        with db.cursor().copy("COPY concept FROM STDIN") as copy:
            for cid, name, domain, vocabulary, klass, code in CONCEPTS:
                copy.write_row((cid, name, domain, vocabulary, klass, "S", code, date(1970, 1, 1),
                                date(2099, 12, 31), None))
        for table, values in rows.items():
            with db.cursor().copy(f"COPY {table} ({COLUMNS[table]}) FROM STDIN") as copy:
                for row in values:
                    copy.write_row(row)
        db.execute(f'GRANT CONNECT ON DATABASE "{database}" TO {READER}')
        db.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER}")
    print(f"{database}: {n} people, {len(rows['condition_occurrence'])} conditions, "
          f"{len(rows['drug_exposure'])} drug exposures, {len(rows['measurement'])} measurements")


def main(argv: list[str] | None = None) -> None:
    """Create the reader role and every hospital's database."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5432)
    parser.add_argument("--user", default="postgres", help="a role that may create databases and roles")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    password = os.environ.get("OMOP_PASSWORD")
    if not password:
        parser.error("set OMOP_PASSWORD: the password of the read-only role the parties log in as")
    connect = {"host": args.host, "port": args.port, "user": args.user}
    with psycopg.connect(**connect, dbname="postgres", autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (READER,)).fetchone()
        verb = "ALTER" if exists else "CREATE"
        admin.execute(f"{verb} ROLE {READER} LOGIN PASSWORD {sql.quote(password)}")
    for k, (database, (n, mean_age)) in enumerate(HOSPITALS.items()):
        write_hospital(connect, database, n, mean_age, args.seed + k)


if __name__ == "__main__":
    main()
