#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Pydantic (Debian's python3-pydantic 1.10) through `glint serve` by plain HTTP: each model's own
# JSON Schema (Model.schema(): definitions + $ref, enums, Optional, nested models, set[...] ->
# uniqueItems, constrained strings and numbers, datetimes, unions) goes out as
# response_format json_schema; every reply that finishes with "stop" must pass
# python3-jsonschema (Draft 7 with the format checker) AND the model's own parsing
# (Model.parse_raw), both independent of glint. A reply cut by max_tokens ("length") is counted,
# not judged. Negative control: a document that breaks each schema must fail both checks, so the
# judges can fail.
#   /usr/bin/python3 tests/server/pydantic_dropin.py BASE_URL [MODEL_NAME]
# Prints `PASS pydantic.NAME ...` / `FAIL pydantic.NAME: why` per model, exits 1 on any FAIL.
import concurrent.futures
import datetime
import decimal
import enum
import json
import sys
import urllib.request
from typing import List, Optional, Set, Union

import jsonschema
import pydantic
from pydantic import BaseModel, Field, conint, confloat, constr, condecimal, conlist

assert pydantic.VERSION.startswith("1."), "needs Debian's python3-pydantic 1.x: " + pydantic.VERSION

BASE = sys.argv[1].rstrip("/")
MODEL = sys.argv[2] if len(sys.argv) > 2 else None
SEEDS = (1, 2)
MAX_TOKENS = 256


# Half the models forbid extra keys (additionalProperties: false in their schema), as teams that
# extract strictly write them; the others leave it unsaid, which a vLLM-compatible server closes
# by default (xgrammar's strict mode).
class Strict(BaseModel):
    class Config:
        extra = "forbid"


class Currency(str, enum.Enum):
    EUR = "EUR"
    USD = "USD"
    JPY = "JPY"


class Customer(Strict):
    name: constr(min_length=1, max_length=24)
    vip: bool


class LineItem(Strict):
    sku: constr(regex=r"^[A-Z]{3}-[0-9]{3}$")
    qty: conint(ge=1, le=99)
    unit_price: confloat(ge=0, le=5000)


class Invoice(Strict):
    number: constr(regex=r"^INV-[0-9]{4}$")
    issued: datetime.date
    currency: Currency
    customer: Customer
    lines: conlist(LineItem, min_items=1, max_items=2)


class Person(BaseModel):
    name: constr(max_length=20)
    age: Optional[conint(ge=0, le=130)]
    # set[str] (uniqueItems over strings, enforced exactly). A set of maxLength strings is still
    # refused by name (an item equal to an earlier one at its full length would be a dead end;
    # docs/GRAMMAR.md), so this model does not use one.
    nicknames: Set[constr(min_length=1)] = Field(default_factory=set, max_items=3)


class Attendee(Strict):
    name: constr(max_length=16)
    accepted: bool


class Event(Strict):
    title: constr(max_length=30)
    starts_at: datetime.datetime
    ends_at: Optional[datetime.datetime]
    attendees: conlist(Attendee, max_items=2)


class Status(str, enum.Enum):
    pending = "pending"
    shipped = "shipped"
    delivered = "delivered"


class Address(Strict):
    street: constr(max_length=24)
    city: constr(max_length=16)
    postcode: constr(regex=r"^[0-9]{5}$")


class Shipment(Strict):
    tracking: constr(regex=r"^[A-Z0-9]{8}$")
    status: Status
    to: Address
    weight_kg: confloat(gt=0, le=100)


class Priority(str, enum.Enum):
    low = "low"
    medium = "medium"
    high = "high"


class SupportTicket(BaseModel):
    customer_id: conint(gt=0, lt=100000)
    priority: Priority
    summary: constr(max_length=40)
    escalate: bool


class ProductReview(BaseModel):
    rating: conint(ge=1, le=5)
    pros: conlist(constr(max_length=12), max_items=2)
    cons: conlist(constr(max_length=12), max_items=2)
    recommend: bool


class ActionItem(Strict):
    owner: constr(max_length=12)
    task: constr(max_length=24)
    due: Optional[datetime.date]


class MeetingNotes(Strict):
    held_on: datetime.date
    decisions: conlist(constr(max_length=20), max_items=2)
    actions: conlist(ActionItem, max_items=2)


class Unit(str, enum.Enum):
    c = "celsius"
    f = "fahrenheit"


class Measurement(Strict):
    sensor: constr(regex=r"^S[0-9]{2}$")
    value: confloat(ge=-50, le=150)
    unit: Unit
    at: datetime.datetime


class Transfer(BaseModel):
    iban: constr(regex=r"^[A-Z]{2}[0-9]{6}$")
    amount: condecimal(gt=0, le=10000, multiple_of=decimal.Decimal("0.01"))
    reference: Optional[constr(max_length=16)]


class Tag(str, enum.Enum):
    quick = "quick"
    vegan = "vegan"
    spicy = "spicy"


class Ingredient(BaseModel):
    name: constr(max_length=12)
    grams: conint(ge=1, le=1000)


class Recipe(BaseModel):
    name: constr(max_length=20)
    servings: conint(ge=1, le=8)
    ingredients: conlist(Ingredient, min_items=1, max_items=2)
    tags: Set[Tag]


class Cat(Strict):
    kind: constr(regex=r"^cat$")
    indoor: bool


class Dog(Strict):
    kind: constr(regex=r"^dog$")
    breed: constr(max_length=12)


class PetOwner(Strict):
    owner: constr(max_length=16)
    pet: Union[Cat, Dog]


# (model, a document that must fail both judges: the negative control)
CASES = [
    (Invoice, {"number": "INV-12", "issued": "2026-01-01", "currency": "EUR",
               "customer": {"name": "A", "vip": True}, "lines": []}),
    (Person, {"name": "A", "age": 200, "nicknames": ["x"]}),
    (Event, {"title": "T", "starts_at": "yesterday", "attendees": []}),
    (Shipment, {"tracking": "ABCDEFGH", "status": "lost", "weight_kg": 1,
                "to": {"street": "s", "city": "c", "postcode": "123"}}),
    (SupportTicket, {"customer_id": 0, "priority": "urgent", "summary": "s", "escalate": False}),
    (ProductReview, {"rating": 9, "pros": [], "cons": [], "recommend": True}),
    (MeetingNotes, {"held_on": "2026-13-45", "decisions": [], "actions": []}),
    (Measurement, {"sensor": "S1", "value": 1000, "unit": "kelvin", "at": "2026-01-01T00:00:00Z"}),
    (Transfer, {"iban": "DE123", "amount": -5}),
    (Recipe, {"name": "r", "servings": 0, "ingredients": [], "tags": ["quick", "quick"]}),
    (PetOwner, {"owner": "o", "pet": {"kind": "fish"}}),
]


def judge(model, schema, doc_text):
    """None when the document passes python3-jsonschema and the model's own parsing."""
    # Non-integers as Decimal on both sides: JSON Schema's multipleOf is exact decimal arithmetic,
    # and python3-jsonschema on floats refuses 0.07 as a multiple of 0.01 (0.07 / 0.01 is
    # 7.000000000000001); pydantic's condecimal compares Decimals too.
    try:
        doc = json.loads(doc_text, parse_float=decimal.Decimal)
    except ValueError as e:
        return "not JSON: %s" % e
    schema = json.loads(json.dumps(schema), parse_float=decimal.Decimal)
    v = jsonschema.Draft7Validator(schema, format_checker=jsonschema.draft7_format_checker)
    errs = sorted(v.iter_errors(doc), key=str)
    if errs:
        return "jsonschema: %s" % errs[0].message[:200]
    try:
        model.parse_raw(doc_text)
    except pydantic.ValidationError as e:
        return "pydantic: %s" % str(e).replace("\n", " ")[:200]
    return None


def post(body):
    req = urllib.request.Request(BASE + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def run(model, bad):
    schema = json.loads(model.schema_json())
    name = model.__name__
    if judge(model, schema, json.dumps(bad)) is None:
        return "FAIL pydantic.%s: negative control %s passed the judges" % (name, bad)
    stops = lengths = 0
    for seed in SEEDS:
        body = {"messages": [{"role": "user", "content": "Extract the %s." % name}],
                "max_tokens": MAX_TOKENS, "seed": seed, "thinking_token_budget": 8,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": name, "schema": schema}}}
        if MODEL:
            body["model"] = MODEL
        status, r = post(body)
        if status != 200:
            return "FAIL pydantic.%s: HTTP %d %s" % (name, status, json.dumps(r)[:300])
        ch = r["choices"][0]
        if ch["finish_reason"] == "length":
            lengths += 1
            continue
        if ch["finish_reason"] != "stop":
            return "FAIL pydantic.%s: finish_reason %s" % (name, ch["finish_reason"])
        why = judge(model, schema, ch["message"]["content"])
        if why:
            return "FAIL pydantic.%s: seed %d: %s; reply %s" % (name, seed, why,
                                                                ch["message"]["content"][:300])
        stops += 1
    if stops == 0:
        return "FAIL pydantic.%s: no reply finished with stop in %d seeds (all cut at %d tokens)" % (
            name, len(SEEDS), MAX_TOKENS)
    return "PASS pydantic.%s (%d stop, all valid; %d length)" % (name, stops, lengths)


def main():
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        lines = list(pool.map(lambda c: run(*c), CASES))
    for line in lines:
        print(line)
    sys.exit(1 if any(l.startswith("FAIL") for l in lines) else 0)


main()
