"""Drives a running genied with the client openapi-python-client generated from its own
OpenAPI document (check.sh builds both). Every call checks the decoded answer's content,
not only its status, so a response schema that does not fit the real answer fails here.

usage: check.py BASE_URL SESSION_TOKEN   (the generated package `genied_client` on PYTHONPATH)
"""

import sys
import uuid

from genied_client import AuthenticatedClient, Client
from genied_client.api.genies import genies_get, genies_post
from genied_client.api.knowledge_base import knowledge_base_get, knowledge_base_post
from genied_client.api.leads import leads_post
from genied_client.models import (
    DocumentCreate,
    Error,
    GenieCreate,
    GeniesCreateBody,
    GeniesCreateResponse,
    GeniesGetResponse,
    KnowledgeBaseCreateBody,
    KnowledgeBaseCreateResponse,
    KnowledgeBaseGetResponse,
    LeadFields,
    LeadFilters,
    LeadListRequest,
    LeadsAllBody,
    LeadsAllResponse,
    LeadsCreateBody,
    LeadsCreateResponse,
)


def expect(cond, what):
    if not cond:
        raise SystemExit(f"client check failed: {what}")


def answer(resp, status, model):
    expect(
        resp.status_code == status,
        f"{resp.status_code} instead of {status}: {resp.content[:500]!r}",
    )
    expect(
        isinstance(resp.parsed, model),
        f"decoded as {type(resp.parsed).__name__}, not {model.__name__}: {resp.content[:500]!r}",
    )
    return resp.parsed.data


def main():
    base, token = sys.argv[1], sys.argv[2]
    client = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True)

    # genies create, then get: the typed Genie record round-trips.
    resp = genies_post.sync_detailed(
        client=client,
        body=GeniesCreateBody(
            action="create",
            data=GenieCreate(
                genie_name="Client Check Genie",
                system_prompt="You answer questions about the client check.",
                category="Support",
                temperature=0.5,
            ),
        ),
    )
    genie = answer(resp, 201, GeniesCreateResponse).genie
    expect(genie.name == "Client Check Genie", f"genie name {genie.name!r}")
    expect(genie.category == "Support", f"genie category {genie.category!r}")
    expect(genie.system_prompt.startswith("You answer"), "genie system prompt")
    uuid.UUID(genie.id)
    got = answer(genies_get.sync_detailed(id=genie.id, client=client), 200, GeniesGetResponse)
    expect(got.genie.id == genie.id and got.genie.temperature == 0.5, "genies get")

    # knowledge-base create, then get by id.
    resp = knowledge_base_post.sync_detailed(
        client=client,
        body=KnowledgeBaseCreateBody(
            action="create",
            data=DocumentCreate(title="Opening hours", content="We open at nine."),
        ),
    )
    doc = answer(resp, 201, KnowledgeBaseCreateResponse).document
    expect(doc.name == "Opening hours", f"document name {doc.name!r}")
    expect(doc.type_ == "text", f"document type {doc.type_!r}")
    resp = knowledge_base_get.sync_detailed(id=doc.id, client=client)
    fetched = answer(resp, 200, KnowledgeBaseGetResponse).document
    expect(fetched.id == doc.id and fetched.name == "Opening hours", "knowledge-base get")
    expect(fetched.dependent_agents == [], f"dependent agents {fetched.dependent_agents!r}")

    # An absent document is the typed error envelope.
    missing = knowledge_base_get.sync_detailed(id=str(uuid.uuid4()), client=client)
    expect(missing.status_code == 404 and isinstance(missing.parsed, Error), "404 envelope")
    expect(missing.parsed.error.code.value == "NOT_FOUND", f"code {missing.parsed.error.code}")
    expect(missing.parsed.error.status == 404, "error status member")

    # leads create, then all with a search term: the lead comes back whole.
    resp = leads_post.sync_detailed(
        client=client,
        body=LeadsCreateBody(
            action="create",
            data=LeadFields(agent_id=genie.id, name="Ada Lovelace", email="ada@example.test"),
        ),
    )
    lead = answer(resp, 201, LeadsCreateResponse).lead
    expect(lead.name == "Ada Lovelace" and lead.agent_id == genie.id, "leads create")
    resp = leads_post.sync_detailed(
        client=client,
        body=LeadsAllBody(
            action="all",
            data=LeadListRequest(filters=LeadFilters(search_term="Lovelace"), limit=10),
        ),
    )
    page = answer(resp, 200, LeadsAllResponse)
    expect(page.count == 1 and page.limit == 10 and page.offset == 0, f"leads all page {page!r}")
    expect([l.id for l in page.leads] == [lead.id], "leads all finds the lead")
    expect(page.leads[0].email == "ada@example.test", "lead email")

    # Without credentials: the typed 401.
    anon = Client(base_url=base)
    resp = leads_post.sync_detailed(
        client=anon, body=LeadsAllBody(action="all", data=LeadListRequest())
    )
    expect(resp.status_code == 401 and isinstance(resp.parsed, Error), "401 without a token")
    expect(resp.parsed.error.code.value == "UNAUTHORIZED", "401 code")


if __name__ == "__main__":
    main()
