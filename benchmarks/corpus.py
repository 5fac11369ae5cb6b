"""A deterministic synthetic corpus of memory-like sentences for the load benchmark.

Sentences come from templates (preferences, people, places, work, health, dated events,
standing instructions) filled from small vocabularies. A template's *anchor* slots (who, what,
where) decide what a sentence is about; its *detail* slots (dates, times, counts) only colour
it. The corpus is built in two steps so that a million rows need only a few thousand
embeddings:

1. a **pool** of distinct sentences (distinct template + anchors), each embedded once with the
   configured embedder;
2. every **row** takes one pool sentence, re-rolls its details (so texts differ across users)
   and gets the pool sentence's vector plus small seeded Gaussian noise, renormalised.

A user's rows use distinct pool sentences, so no two rows of one user are identical (the
service refuses exact duplicates). Everything derives from the seed: the same seed, sizes and
pool give the same texts, vectors and ids.
"""

from __future__ import annotations

import hashlib
import random
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

# Details are re-rolled per row; every other slot is an anchor.
DETAIL_SLOTS = frozenset({"date", "weekday", "time", "count", "year", "minutes"})
# Corpus dates are fixed, not relative to the run, so two runs store the same rows.
CORPUS_EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
CORPUS_DAYS = 3 * 365


def _words(spec: str) -> tuple[str, ...]:
    """A vocabulary from one "a | b | c" string (kept compact: these are data, not code)."""
    return tuple(word.strip() for word in spec.split("|"))


VOCABULARY: Mapping[str, Sequence[str]] = {
    "person": _words(
        "Lena | Marco | Aisha | Tomás | Priya | Jonas | Mei | Olivia | Kwame | Sofia | Daniel |"
        " Yuki | Fatima | Lucas | Ingrid | Ravi | Chloé | Mateo | Hannah | Omar | Elena | Noah |"
        " Zara | Felix | Amara | Leo | Nadia | Samuel | Ines | Victor"
    ),
    "relation": _words(
        "sister | brother | mother | father | daughter | son | partner | best friend | colleague"
        " | manager | neighbour | cousin | grandmother | roommate | mentor"
    ),
    "city": _words(
        "Lisbon | Berlin | Nairobi | Toronto | Osaka | Porto | Austin | Melbourne | Lyon | Seoul"
        " | Bogotá | Edinburgh | Cape Town | Montreal | Kraków | Denver | Valencia | Helsinki |"
        " Singapore | Dublin | Milan | Vancouver | Accra | Oslo"
    ),
    "country": _words(
        "Portugal | Japan | Kenya | Canada | Mexico | Norway | Vietnam | Chile | Morocco |"
        " Iceland | Greece | Peru | New Zealand | Italy | Georgia | Ireland"
    ),
    "drink": _words(
        "black coffee | oat milk latte | green tea | sparkling water | chai | espresso | rooibos"
        " tea | hot chocolate | cold brew | peppermint tea | flat white | matcha"
    ),
    "food": _words(
        "sushi | ramen | tacos | lasagna | falafel | pho | dumplings | paella | shakshuka |"
        " risotto | pad thai | jollof rice | pierogi | curry | ceviche | bibimbap | pizza |"
        " moussaka | empanadas | gnocchi"
    ),
    "cuisine": _words(
        "Japanese | Mexican | Ethiopian | Italian | Thai | Lebanese | Korean | Peruvian | Greek |"
        " Indian | Vietnamese | Georgian | Moroccan | Spanish"
    ),
    "diet": _words(
        "vegetarian | vegan | gluten-free | pescatarian | lactose-free | low-sodium | halal |"
        " nut-free | keto"
    ),
    "allergy": _words(
        "peanuts | shellfish | penicillin | cat dander | pollen | latex | bee stings | sesame |"
        " dust mites | eggs"
    ),
    "hobby": _words(
        "bouldering | pottery | birdwatching | sourdough baking | trail running | woodworking |"
        " chess | salsa dancing | knitting | astrophotography | gardening | surfing | calligraphy"
        " | open-water swimming | film photography | beekeeping"
    ),
    "instrument": _words(
        "cello | piano | guitar | violin | drums | saxophone | ukulele | flute | bass guitar |"
        " trumpet"
    ),
    "sport": _words(
        "tennis | football | basketball | volleyball | badminton | cycling | rowing | climbing |"
        " yoga | table tennis | cricket | hockey"
    ),
    "pet": _words("dog | cat | rabbit | parrot | tortoise | hamster | horse | ferret"),
    "pet_name": _words(
        "Biscuit | Luna | Pepper | Miso | Shadow | Sheldon | Pickles | Nova | Ziggy | Mochi |"
        " Rufus | Olive"
    ),
    "company": _words(
        "Northwind | Brightline | Acme Robotics | Helios Energy | Bluefin Labs | Granite Health |"
        " Copperleaf | Orbital Foods | Tidewater Bank | Lumen Studio | Pinecrest Logistics |"
        " Quartz Analytics"
    ),
    "job": _words(
        "data engineer | nurse | product manager | architect | teacher | accountant | UX designer"
        " | civil engineer | pharmacist | journalist | paramedic | backend developer | marketing"
        " lead | research scientist | electrician"
    ),
    "team": _words(
        "payments | search | mobile | infrastructure | growth | security | billing | onboarding |"
        " analytics | customer support"
    ),
    "language": _words(
        "Spanish | Japanese | German | Portuguese | Korean | French | Arabic | Mandarin | Italian"
        " | Swahili | Dutch | Polish"
    ),
    "tool": _words(
        "Python | TypeScript | Rust | Go | Postgres | Kubernetes | Figma | Excel | Terraform |"
        " Kotlin | React | Jupyter notebooks"
    ),
    "project": _words(
        "the billing migration | the mobile redesign | the data warehouse | the Q3 launch | the"
        " search rewrite | the onboarding revamp | the security audit | the pricing experiment |"
        " the API v2 rollout | the office move"
    ),
    "book": _words(
        "Dune | Middlemarch | The Left Hand of Darkness | Piranesi | Beloved | The Overstory |"
        " Pachinko | Circe | Project Hail Mary | Things Fall Apart"
    ),
    "genre": _words(
        "science fiction | historical fiction | mystery novels | poetry | biographies | fantasy |"
        " true crime podcasts | graphic novels | travel writing | jazz | lo-fi beats | classical"
        " music"
    ),
    "band": _words(
        "Radiohead | Fleetwood Mac | Khruangbin | Björk | Fela Kuti | Daft Punk | Nina Simone |"
        " Arctic Monkeys | Bon Iver | Tame Impala"
    ),
    "condition": _words(
        "asthma | migraines | type 1 diabetes | a knee injury | back pain | insomnia | hay fever"
        " | high blood pressure"
    ),
    "clinician": _words(
        "dentist | physiotherapist | dermatologist | GP | optician | cardiologist | therapist |"
        " allergist"
    ),
    "event": _words(
        "a wedding | a job interview | a conference talk | a half marathon | a family reunion | a"
        " product demo | a hackathon | a piano recital | a housewarming party | a board meeting"
    ),
    "vehicle": _words("bike | car | scooter | camper van | motorbike"),
    "tone": _words(
        "short and direct | friendly and informal | formal | detailed with examples | bullet"
        " points only | gentle and encouraging"
    ),
    "channel": _words("email | Slack | SMS | a phone call | WhatsApp | a calendar invite"),
    "colour": _words("dark mode | light mode | high-contrast mode | a large font"),
    "weekday": _words("Monday | Tuesday | Wednesday | Thursday | Friday | Saturday | Sunday"),
}

MONTHS = _words(
    "January | February | March | April | May | June | July | August | September | October"
    " | November | December"
)


@dataclass(frozen=True)
class Template:
    kind: str
    category: str
    text: str
    # Natural questions whose answer is this memory; they use only anchor slots.
    questions: tuple[str, ...]


TEMPLATES: tuple[Template, ...] = (
    # --- preferences ------------------------------------------------------------------------
    Template(
        "semantic",
        "preference",
        "Prefers {drink} in the morning and usually has {count} cups before noon.",
        ("What does the user like to drink in the morning?", "How does the user take {drink}?"),
    ),
    Template(
        "semantic",
        "preference",
        "Favourite food is {food}, especially from the {cuisine} place near work.",
        ("What is the user's favourite food?", "Which {cuisine} dish does the user love?"),
    ),
    Template(
        "semantic",
        "preference",
        "Follows a {diet} diet and avoids restaurants without {diet} options.",
        ("Does the user have any dietary restrictions?", "What kind of diet does the user follow?"),
    ),
    Template(
        "semantic",
        "preference",
        "Enjoys {genre} and is currently re-reading {book}.",
        ("What does the user like to read?", "Which book is the user reading at the moment?"),
    ),
    Template(
        "semantic",
        "preference",
        "Listens to {band} while working and finds {genre} helps with focus.",
        ("What music does the user listen to while working?", "Does the user like {band}?"),
    ),
    Template(
        "semantic",
        "preference",
        "Prefers {colour} in every app and finds bright screens tiring after {time}.",
        ("Which display setting does the user prefer?", "Does the user like {colour}?"),
    ),
    Template(
        "semantic",
        "preference",
        "Would rather be contacted by {channel} than by phone during work hours.",
        ("How does the user prefer to be contacted?", "Can I reach the user by {channel}?"),
    ),
    Template(
        "semantic",
        "preference",
        "Likes {cuisine} cooking and wants to learn to make {food} at home.",
        ("What dish does the user want to learn to cook?", "Which cuisine does the user like?"),
    ),
    # --- people -------------------------------------------------------------------------------
    Template(
        "semantic",
        "person",
        "The user's {relation} {person} lives in {city} and works as a {job}.",
        ("Where does the user's {relation} live?", "What does {person} do for a living?"),
    ),
    Template(
        "semantic",
        "person",
        "{person}, the user's {relation}, is allergic to {allergy}.",
        ("What is {person} allergic to?", "Does the user's {relation} have any allergies?"),
    ),
    Template(
        "semantic",
        "person",
        "{person} plays the {instrument} and teaches lessons on {weekday} evenings.",
        ("Who plays the {instrument}?", "What instrument does {person} play?"),
    ),
    Template(
        "semantic",
        "person",
        "The user's {relation} {person} is a big fan of {sport} and {band}.",
        ("Which sport does the user's {relation} follow?", "What is {person} a fan of?"),
    ),
    Template(
        "semantic",
        "person",
        "{person} is the user's {relation} and has a {pet} called {pet_name}.",
        ("What is the name of {person}'s {pet}?", "Who owns a {pet} named {pet_name}?"),
    ),
    # --- places -------------------------------------------------------------------------------
    Template(
        "semantic",
        "place",
        "Lives in {city} and commutes by {vehicle}, about {minutes} minutes each way.",
        ("Where does the user live?", "How does the user get to work?"),
    ),
    Template(
        "semantic",
        "place",
        "Grew up in {city} and still visits their {relation} {person} there every summer.",
        ("Where did the user grow up?", "Who does the user visit in {city}?"),
    ),
    Template(
        "semantic",
        "place",
        "Dreams of spending a month in {country} to practise {language}.",
        (
            "Which country does the user want to visit?",
            "Why does the user want to go to {country}?",
        ),
    ),
    # --- work ---------------------------------------------------------------------------------
    Template(
        "semantic",
        "work",
        "Works as a {job} at {company} on the {team} team.",
        ("Where does the user work?", "What is the user's job?"),
    ),
    Template(
        "semantic",
        "work",
        "Is leading {project} at {company} and reports to {person}.",
        ("Which project is the user leading?", "Who does the user report to?"),
    ),
    Template(
        "semantic",
        "work",
        "Uses {tool} every day and wants to get better at {tool2}.",
        ("Which tools does the user use at work?", "What does the user want to learn next?"),
    ),
    Template(
        "semantic",
        "work",
        "Has a standing one-to-one with {person} every {weekday} at {time}.",
        ("When is the user's one-to-one with {person}?", "Who does the user meet every week?"),
    ),
    # --- health -------------------------------------------------------------------------------
    Template(
        "semantic",
        "health",
        "Has {condition} and keeps medication in the {vehicle} just in case.",
        ("Does the user have any health conditions?", "What medical condition does the user have?"),
    ),
    Template(
        "semantic",
        "health",
        "Is allergic to {allergy} and carries an antihistamine when travelling.",
        ("What is the user allergic to?", "Does the user have allergies?"),
    ),
    # --- hobbies ------------------------------------------------------------------------------
    Template(
        "semantic",
        "hobby",
        "Took up {hobby} last year and practises {count} times a week.",
        ("What hobbies does the user have?", "How often does the user go {hobby}?"),
    ),
    Template(
        "semantic",
        "hobby",
        "Is learning the {instrument} with {person} and can play {count} songs so far.",
        ("Which instrument is the user learning?", "Who teaches the user the {instrument}?"),
    ),
    Template(
        "semantic",
        "hobby",
        "Plays {sport} with friends from {company} on {weekday} nights.",
        ("Which sport does the user play?", "When does the user play {sport}?"),
    ),
    Template(
        "semantic",
        "hobby",
        "Has a {pet} named {pet_name} who needs a walk at {time}.",
        ("Does the user have a pet?", "What is the name of the user's {pet}?"),
    ),
    # --- dated events (episodic) --------------------------------------------------------------
    Template(
        "episodic",
        "travel",
        "On {date} the user flew to {city} for {event} with {person}.",
        ("When did the user travel to {city}?", "Who went to {city} with the user?"),
    ),
    Template(
        "episodic",
        "event",
        "Went to {event} in {city} on {date} and said it was the highlight of the month.",
        ("What did the user do in {city}?", "When was the user at {event}?"),
    ),
    Template(
        "episodic",
        "health",
        "Saw the {clinician} on {date} about {condition}; follow-up in {count} weeks.",
        ("When did the user last see the {clinician}?", "What did the {clinician} say?"),
    ),
    Template(
        "episodic",
        "work",
        "Presented {project} to the {team} team on {date}; it went better than expected.",
        ("When did the user present {project}?", "How did the presentation to {team} go?"),
    ),
    Template(
        "episodic",
        "event",
        "Celebrated {person}'s birthday on {date} with {food} at a {cuisine} restaurant.",
        ("How did the user celebrate {person}'s birthday?", "When is {person}'s birthday?"),
    ),
    Template(
        "episodic",
        "hobby",
        "Finished a {count} km {sport} session on {date} despite the rain.",
        ("When did the user last do {sport}?", "How far did the user go {sport}?"),
    ),
    Template(
        "episodic",
        "person",
        "Adopted a {pet} called {pet_name} on {date} from a shelter in {city}.",
        ("When did the user adopt {pet_name}?", "Where did the user's {pet} come from?"),
    ),
    Template(
        "episodic",
        "travel",
        "Spent {count} days in {country} in {year} and came back wanting to learn {language}.",
        ("When was the user in {country}?", "How long did the user stay in {country}?"),
    ),
    Template(
        "episodic",
        "work",
        "Started a new role as {job} at {company} on {date}.",
        ("When did the user start at {company}?", "What is the user's new role?"),
    ),
    Template(
        "episodic",
        "event",
        "Missed {event} on {date} because the {vehicle} broke down.",
        ("Why did the user miss {event}?", "What happened to the user's {vehicle}?"),
    ),
    # --- standing instructions (procedural) ---------------------------------------------------
    Template(
        "procedural",
        "style",
        "Answer in {language} when the user writes in {language}; keep replies {tone}.",
        ("Which language should replies use?", "How should answers be written?"),
    ),
    Template(
        "procedural",
        "workflow",
        "Before scheduling anything, check the user's calendar and avoid {weekday} mornings.",
        ("When should meetings not be scheduled?", "How should the assistant schedule meetings?"),
    ),
    Template(
        "procedural",
        "task_policies",
        "Send reminders about {project} by {channel}, never by {channel2}.",
        ("How should reminders be sent?", "Which channel should reminders about {project} use?"),
    ),
    Template(
        "procedural",
        "style",
        "Format code examples in {tool} and explain them {tone}.",
        ("Which language should code examples use?", "How should code be explained?"),
    ),
)

# Slots whose vocabulary is another slot's (a second, different tool or channel).
_SLOT_VOCABULARY = {"tool2": "tool", "channel2": "channel"}
_SLOT = re.compile(r"{(\w+)}")


@dataclass(frozen=True)
class PoolSentence:
    """A distinct template + anchor combination, embedded once."""

    template: int
    anchors: tuple[tuple[str, str], ...]
    text: str


@dataclass(frozen=True)
class MemoryRow:
    """One memory as the bulk path stores it."""

    id: uuid.UUID
    tenant_id: str
    user_id: str | None
    kind: str
    category: str
    text: str
    pool_index: int
    confidence: float
    lifecycle: str
    event_at: datetime | None
    created_at: datetime


@dataclass(frozen=True)
class CorpusShape:
    """N tenants x M users x K memories (plus a few org-shared memories per tenant)."""

    memories_per_user: int
    users_per_tenant: int
    org_memories_per_tenant: int
    seed: int
    tenant_prefix: str = "bench-load"

    def users_for(self, user_memories: int) -> int:
        """How many users hold `user_memories` memories (a multiple of memories_per_user)."""
        if user_memories % self.memories_per_user:
            raise ValueError(
                f"{user_memories} is not a multiple of {self.memories_per_user} memories per user"
            )
        return user_memories // self.memories_per_user

    def tenants_for(self, users: int) -> int:
        return -(-users // self.users_per_tenant)

    def tenant_id(self, tenant: int) -> str:
        return f"{self.tenant_prefix}-{tenant:05d}"

    def user_id(self, user: int) -> str:
        """Users are numbered across the corpus: user u belongs to tenant u // users_per_tenant."""
        return f"user-{user:07d}"

    def owner_of(self, user: int) -> str:
        return self.tenant_id(user // self.users_per_tenant)

    def total_rows(self, user_memories: int) -> int:
        users = self.users_for(user_memories)
        return user_memories + self.tenants_for(users) * self.org_memories_per_tenant


def _slots(text: str) -> list[str]:
    return _SLOT.findall(text)


def _vocabulary(slot: str) -> Sequence[str]:
    return VOCABULARY[_SLOT_VOCABULARY.get(slot, slot)]


def _details(rng: random.Random) -> tuple[dict[str, str], datetime]:
    """Fresh detail values, and the date they name (the memory's event time when dated)."""
    day = CORPUS_EPOCH - timedelta(days=rng.randrange(CORPUS_DAYS))
    values = {
        "date": f"{day.day} {MONTHS[day.month - 1]} {day.year}",
        "weekday": rng.choice(VOCABULARY["weekday"]),
        "time": f"{rng.randrange(6, 22)}:{rng.choice(('00', '15', '30', '45'))}",
        "count": str(rng.randrange(2, 15)),
        "year": str(day.year),
        "minutes": str(rng.randrange(10, 70, 5)),
    }
    return values, day.replace(hour=12)


def _render(template: Template, anchors: Mapping[str, str], details: Mapping[str, str]) -> str:
    values = {**details, **anchors}
    return _SLOT.sub(lambda match: values[match.group(1)], template.text)


def build_pool(size: int, seed: int) -> list[PoolSentence]:
    """`size` distinct sentences (distinct template + anchors), in a seed-determined order."""
    rng = random.Random(f"pool-{seed}")  # noqa: S311 - a reproducible corpus, not secrets
    pool: list[PoolSentence] = []
    seen: set[tuple[int, tuple[tuple[str, str], ...]]] = set()
    attempts = 0
    while len(pool) < size:
        attempts += 1
        if attempts > size * 50:
            raise ValueError(f"the templates cannot make {size} distinct sentences")
        index = rng.randrange(len(TEMPLATES))
        template = TEMPLATES[index]
        anchors: dict[str, str] = {}
        for slot in _slots(template.text):
            if slot in DETAIL_SLOTS or slot in anchors:
                continue
            choices = [v for v in _vocabulary(slot) if v not in anchors.values()]
            anchors[slot] = rng.choice(choices)
        key = (index, tuple(sorted(anchors.items())))
        if key in seen:
            continue
        seen.add(key)
        details, _ = _details(rng)
        pool.append(PoolSentence(index, key[1], _render(template, anchors, details)))
    return pool


def _uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


class Corpus:
    """The rows of users and tenants, generated on demand from the seed and the pool."""

    def __init__(self, shape: CorpusShape, pool: Sequence[PoolSentence]) -> None:
        if shape.memories_per_user > len(pool) or shape.org_memories_per_tenant > len(pool):
            raise ValueError(
                f"a pool of {len(pool)} sentences cannot give one owner "
                f"{max(shape.memories_per_user, shape.org_memories_per_tenant)} distinct memories"
            )
        self.shape = shape
        self.pool = pool

    def _owner_rows(
        self, key: str, tenant_id: str, user_id: str | None, count: int
    ) -> list[MemoryRow]:
        rng = random.Random(f"{self.shape.seed}-{key}")  # noqa: S311 - reproducible, not secret
        rows: list[MemoryRow] = []
        for pool_index in rng.sample(range(len(self.pool)), count):
            sentence = self.pool[pool_index]
            template = TEMPLATES[sentence.template]
            details, day = _details(rng)
            proposed = rng.random() < 0.1
            rows.append(
                MemoryRow(
                    id=_uuid(rng),
                    tenant_id=tenant_id,
                    user_id=user_id,
                    kind=template.kind,
                    category=template.category,
                    text=_render(template, dict(sentence.anchors), details),
                    pool_index=pool_index,
                    confidence=round(rng.uniform(0.5, 1.0), 2),
                    lifecycle="proposed" if proposed else "confirmed",
                    event_at=day if template.kind == "episodic" else None,
                    created_at=CORPUS_EPOCH - timedelta(seconds=rng.randrange(CORPUS_DAYS * 86400)),
                )
            )
        return rows

    def user_rows(self, user: int) -> list[MemoryRow]:
        """User `user`'s memories (the same list every time)."""
        shape = self.shape
        return self._owner_rows(
            f"user-{user}", shape.owner_of(user), shape.user_id(user), shape.memories_per_user
        )

    def org_rows(self, tenant: int) -> list[MemoryRow]:
        """Tenant `tenant`'s org-shared memories."""
        shape = self.shape
        return self._owner_rows(
            f"org-{tenant}", shape.tenant_id(tenant), None, shape.org_memories_per_tenant
        )

    def heavy_user_rows(self, tenant_id: str, user_id: str, count: int) -> list[MemoryRow]:
        """`count` memories of one user, far more than the pool has sentences: pool sentences
        recur with re-rolled details (a heavy user's memories are many variations on the same
        topics), and a text the user already has is drawn again, so no text repeats."""
        rng = random.Random(f"{self.shape.seed}-heavy-{tenant_id}-{user_id}")  # noqa: S311
        rows: list[MemoryRow] = []
        seen: set[str] = set()
        attempts = 0
        while len(rows) < count:
            attempts += 1
            if attempts > count * 20:
                raise ValueError(f"the pool cannot make {count} distinct memories for one user")
            pool_index = rng.randrange(len(self.pool))
            sentence = self.pool[pool_index]
            template = TEMPLATES[sentence.template]
            details, day = _details(rng)
            text = _render(template, dict(sentence.anchors), details)
            # The service's duplicate key: whitespace-collapsed, case-folded text.
            key = " ".join(text.lower().split())
            if key in seen:
                continue
            seen.add(key)
            proposed = rng.random() < 0.1
            rows.append(
                MemoryRow(
                    id=_uuid(rng),
                    tenant_id=tenant_id,
                    user_id=user_id,
                    kind=template.kind,
                    category=template.category,
                    text=text,
                    pool_index=pool_index,
                    confidence=round(rng.uniform(0.5, 1.0), 2),
                    lifecycle="proposed" if proposed else "confirmed",
                    event_at=day if template.kind == "episodic" else None,
                    created_at=CORPUS_EPOCH - timedelta(seconds=rng.randrange(CORPUS_DAYS * 86400)),
                )
            )
        return rows

    def question(self, row: MemoryRow, rng: random.Random) -> str:
        """A natural question that `row` answers."""
        sentence = self.pool[row.pool_index]
        template = TEMPLATES[sentence.template]
        return rng.choice(template.questions).format_map(dict(sentence.anchors))


def noisy_vectors(
    base: npt.NDArray[np.float32], noise: float, key: str, seed: int
) -> npt.NDArray[np.float32]:
    """Each base vector plus isotropic Gaussian noise of expected norm `noise`, renormalised.

    The expected cosine to the base is about 1 / sqrt(1 + noise²). Seeded by `key`, so a
    row's vector does not depend on which other rows are generated with it.
    """
    digest = hashlib.sha256(f"{seed}-{key}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    dims = base.shape[1]
    vectors = base + rng.standard_normal(base.shape, dtype=np.float32) * np.float32(
        noise / np.sqrt(dims)
    )
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors


def sample_queries(
    corpus: Corpus, users: int, count: int, seed: int
) -> Iterator[tuple[str, str, str, MemoryRow]]:
    """`count` searches: (tenant, user, question, the memory it was asked about), each by a
    random user among the first `users`, about one of that user's own memories."""
    rng = random.Random(f"queries-{seed}-{users}")  # noqa: S311 - reproducible, not secret
    for _ in range(count):
        user = rng.randrange(users)
        row = rng.choice(corpus.user_rows(user))
        yield row.tenant_id, corpus.shape.user_id(user), corpus.question(row, rng), row


def describe(shape: CorpusShape) -> dict[str, Any]:
    """The generator's configuration, for the results file."""
    return {
        "templates": len(TEMPLATES),
        "kinds": sorted({t.kind for t in TEMPLATES}),
        "categories": sorted({t.category for t in TEMPLATES}),
        "vocabulary_words": sum(len(words) for words in VOCABULARY.values()),
        "memories_per_user": shape.memories_per_user,
        "users_per_tenant": shape.users_per_tenant,
        "org_memories_per_tenant": shape.org_memories_per_tenant,
        "seed": shape.seed,
        "proposed_share": 0.1,
        "epoch": CORPUS_EPOCH.isoformat(),
    }
