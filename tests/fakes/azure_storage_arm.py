"""Storage, managed-identity and role-assignment routes of the fake ARM server (tests/fakes/azure_arm.py).

What it models, from the documented ARM behaviour and wire shapes:

* ``Microsoft.Storage/checkNameAvailability`` (account names are global: taken by any resource
  group here or by another subscription, see the ``taken`` lever) and ``storageAccounts``: PUT
  answers 202 + ``Location`` polled to 200 with the account; ``AccountNameInvalid`` (400),
  ``StorageAccountAlreadyTaken`` (409);
* ``blobServices/default/containers``: PUT/GET, ``ContainerNotFound``; ``PublicAccessNotPermitted``
  (409) on an account with ``allowBlobPublicAccess: false``; ``ParentResourceNotFound`` (404);
* ``managementPolicies/default``: PUT/GET/DELETE, ``ManagementPolicyNotFound``, rules validated
  (alphanumeric names, at least one rule);
* ``Microsoft.ManagedIdentity/userAssignedIdentities``: PUT/GET with server-made ``principalId`` /
  ``clientId`` / ``tenantId``;
* ``Microsoft.Authorization/roleAssignments`` at any scope: the name must be a GUID
  (``InvalidRoleAssignmentId``), the scope must exist, the role definition must be a built-in the
  fake knows (``RoleDefinitionDoesNotExist``), a principal not yet known needs ``principalType``
  (``PrincipalNotFound``: the fake treats every principal as not yet replicated, so ``principalType``
  is required), the same role for the same principal at the same scope
  is ``RoleAssignmentExists`` (409), whatever its name.

Control (``/_control/storage/...``): ``taken`` (``{"names": [...]}``: account names another
subscription holds) and ``state`` (accounts, containers, policies, identities, role assignments,
writes: the count of PUT/DELETE calls that changed something).
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

TENANT = "00000000-0000-0000-0000-0000000a11ce"
#: Built-in role definition ids the fake knows (name for messages).
ROLES = {
    "ba92f5b4-2d11-453d-a403-e96b0029c9fe": "Storage Blob Data Contributor",
    "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1": "Storage Blob Data Reader",
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": "Reader",
}
ACCOUNT_NAME = re.compile(r"^[a-z0-9]{3,24}$")
CONTAINER_NAME = re.compile(r"^(?!.*--)[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
RULE_NAME = re.compile(r"^[A-Za-z0-9]{1,256}$")
GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


class StorageState:
    """The storage-side tables of the fake (guarded by the ARM state's lock)."""

    def __init__(self) -> None:
        self.accounts: dict[str, dict[str, Any]] = {}  # account name -> account (names are global)
        self.containers: dict[tuple[str, str], dict[str, Any]] = {}
        self.policies: dict[str, dict[str, Any]] = {}
        self.identities: dict[tuple[str, str], dict[str, Any]] = {}
        self.assignments: dict[str, dict[str, Any]] = {}  # id (lower) -> assignment
        self.taken: set[str] = set()
        self.ops: dict[str, dict[str, Any]] = {}
        self.writes = 0

    def view(self) -> dict[str, Any]:
        return {
            "accounts": [_public(a) for a in self.accounts.values()],
            "containers": list(self.containers.values()),
            "policies": list(self.policies.values()),
            "identities": list(self.identities.values()),
            "role_assignments": list(self.assignments.values()),
            "writes": self.writes,
        }


def handles(rest: list[str]) -> bool:
    """True for a subscription-relative path (lowercased segments) this module serves."""
    return any(p in ("microsoft.storage", "microsoft.managedidentity", "microsoft.authorization") for p in rest)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.0000000Z", time.gmtime())


def route(h: Any, method: str, orig: list[str], rest: list[str], body: dict[str, Any]) -> None:
    """Serve one request; ``h`` is the ARM fake's handler, ``orig``/``rest`` the path after the
    subscription (original case / lowercased)."""
    st: StorageState = h.st.storage
    sub = h.path.split("/")[2]
    if rest == ["providers", "microsoft.storage", "checknameavailability"] and method == "POST":
        return h._send(200, _availability(st, str(body.get("name", ""))))
    if rest[:4] == ["providers", "microsoft.storage", "locations", "asyncoperations"] or (
        len(rest) == 6 and rest[:3] == ["providers", "microsoft.storage", "locations"]
    ):
        return _poll(h, st, orig[-1])
    role_at = next(
        (
            i
            for i in range(len(rest) - 2)
            if rest[i : i + 3] == ["providers", "microsoft.authorization", "roleassignments"]
        ),
        None,
    )
    if role_at is not None:
        return _role(h, st, method, sub, orig, rest, role_at, body)
    if rest[:1] != ["resourcegroups"] or len(rest) < 6:
        return h._error(404, "InvalidResourceType", f"no route {h.path}")
    rg = orig[1]
    if rg.lower() not in h.st.groups:
        return h._error(404, "ResourceGroupNotFound", f"Resource group '{rg}' could not be found.")
    kind = "/".join(rest[3:5])
    if kind == "microsoft.managedidentity/userassignedidentities" and len(rest) == 6:
        return _identity(h, st, method, sub, rg, orig[5], body)
    if kind == "microsoft.storage/storageaccounts":
        if len(rest) == 6:
            return _account(h, st, method, sub, rg, orig[5], body)
        account = st.accounts.get(orig[5].lower())
        if account is None or account["_rg"] != rg.lower():
            return h._error(
                404,
                "ParentResourceNotFound",
                f"Failed to perform '{method.lower()}' on resource(s) of "
                f"type 'storageAccounts/{'/'.join(orig[6:])}', because the parent resource "
                f"'/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Storage/storageAccounts/"
                f"{orig[5]}' could not be found.",
            )
        if rest[6:9] == ["blobservices", "default", "containers"] and len(rest) == 10:
            return _container(h, st, method, account, orig[9], body)
        if rest[6:8] == ["managementpolicies", "default"] and len(rest) == 8:
            return _policy(h, st, method, account, body)
    return h._error(404, "InvalidResourceType", f"no route {h.path}")


# ---- storage accounts -------------------------------------------------------------------------
def _availability(st: StorageState, name: str) -> dict[str, Any]:
    if not ACCOUNT_NAME.match(name):
        return {
            "nameAvailable": False,
            "reason": "AccountNameInvalid",
            "message": f"{name} is not a valid storage account name. Storage account name must be between 3 "
            "and 24 characters in length and use numbers and lower-case letters only.",
        }
    if name in st.accounts or name in st.taken:
        return {
            "nameAvailable": False,
            "reason": "AlreadyExists",
            "message": f"The storage account named {name} is already taken.",
        }
    return {"nameAvailable": True}


def _public(account: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in account.items() if not k.startswith("_")}


def _account(h: Any, st: StorageState, method: str, sub: str, rg: str, name: str, body: dict[str, Any]) -> None:
    found = st.accounts.get(name)
    ours = found is not None and found["_rg"] == rg.lower()
    if method == "GET":
        if not ours:
            return h._error(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.Storage/storageAccounts/{name}' "
                f"under resource group '{rg}' was not found. For more details please go to "
                "https://aka.ms/ARMResourceNotFoundFix",
            )
        return h._send(200, _public(found))
    if method != "PUT":
        return h._error(405, "MethodNotAllowed", method)
    answer = _availability(st, name)
    if answer.get("reason") == "AccountNameInvalid":
        return h._error(400, "AccountNameInvalid", answer["message"])
    if not ours and not answer["nameAvailable"]:
        return h._error(409, "StorageAccountAlreadyTaken", f"The storage account named {name} is already taken.")
    props = body.get("properties") or {}
    account = {
        "id": f"/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Storage/storageAccounts/{name}",
        "name": name,
        "type": "Microsoft.Storage/storageAccounts",
        "location": body.get("location", ""),
        "tags": body.get("tags") or {},
        "kind": body.get("kind", "StorageV2"),
        "sku": {**(body.get("sku") or {"name": "Standard_LRS"}), "tier": "Standard"},
        "properties": {
            "provisioningState": "Succeeded",
            "creationTime": _now(),
            "supportsHttpsTrafficOnly": props.get("supportsHttpsTrafficOnly", True),
            "allowBlobPublicAccess": props.get("allowBlobPublicAccess", False),
            "minimumTlsVersion": props.get("minimumTlsVersion", "TLS1_0"),
            "accessTier": props.get("accessTier", "Hot"),
            "primaryEndpoints": {
                "blob": f"https://{name}.blob.core.windows.net/",
                "dfs": f"https://{name}.dfs.core.windows.net/",
            },
            "primaryLocation": body.get("location", ""),
            "statusOfPrimary": "available",
        },
        "_rg": rg.lower(),
    }
    st.accounts[name] = account
    st.writes += 1
    oid = str(uuid.uuid4())
    st.ops[oid] = {"account": name, "polls": 0}
    location = (
        f"http://{h.headers.get('Host')}/subscriptions/{sub}/providers/Microsoft.Storage/locations/"
        f"{account['location']}/asyncoperations/{oid}?monitor=true&api-version=2023-05-01"
    )
    return h._send(202, None, {"Location": location, "Retry-After": "0"})


def _poll(h: Any, st: StorageState, oid: str) -> None:
    op = st.ops.get(oid)
    if op is None:
        return h._error(404, "NotFound", f"operation {oid} not found")
    op["polls"] += 1
    if op["polls"] == 1:
        return h._send(202, None, {"Location": f"http://{h.headers.get('Host')}{h.path}", "Retry-After": "0"})
    return h._send(200, _public(st.accounts[op["account"]]))


# ---- containers and lifecycle policies --------------------------------------------------------
def _container(h: Any, st: StorageState, method: str, account: dict[str, Any], name: str, body: dict[str, Any]) -> None:
    key = (account["name"], name)
    if method == "GET":
        if key not in st.containers:
            return h._error(404, "ContainerNotFound", "The specified container does not exist.")
        return h._send(200, st.containers[key])
    if method != "PUT":
        return h._error(405, "MethodNotAllowed", method)
    if not CONTAINER_NAME.match(name):
        return h._error(
            400, "ContainerOperationFailure", f"The specifed resource name '{name}' contains invalid characters."
        )
    public = (body.get("properties") or {}).get("publicAccess") or "None"
    if public != "None" and not account["properties"]["allowBlobPublicAccess"]:
        return h._error(409, "PublicAccessNotPermitted", "Public access is not permitted on this storage account.")
    created = key not in st.containers
    st.containers[key] = {
        "id": f"{account['id']}/blobServices/default/containers/{name}",
        "name": name,
        "type": "Microsoft.Storage/storageAccounts/blobServices/containers",
        "etag": f'"0x{uuid.uuid4().hex[:15].upper()}"',
        "properties": {
            "publicAccess": public,
            "leaseStatus": "Unlocked",
            "leaseState": "Available",
            "hasImmutabilityPolicy": False,
            "hasLegalHold": False,
            "lastModifiedTime": _now(),
        },
    }
    st.writes += 1
    return h._send(201 if created else 200, st.containers[key])


def _policy(h: Any, st: StorageState, method: str, account: dict[str, Any], body: dict[str, Any]) -> None:
    name = account["name"]
    if method == "GET":
        if name not in st.policies:
            return h._error(404, "ManagementPolicyNotFound", f"No ManagementPolicy found for account {name}")
        return h._send(200, st.policies[name])
    if method == "DELETE":
        if st.policies.pop(name, None) is not None:
            st.writes += 1
        return h._send(200)
    if method != "PUT":
        return h._error(405, "MethodNotAllowed", method)
    rules = ((body.get("properties") or {}).get("policy") or {}).get("rules") or []
    if not rules:
        return h._error(400, "InvalidManagementPolicyRules", "ManagementPolicy rules cannot be empty.")
    for rule in rules:
        if not RULE_NAME.match(str(rule.get("name", ""))) or rule.get("type") != "Lifecycle":
            return h._error(
                400,
                "InvalidManagementPolicyRules",
                f"Rule name {rule.get('name')!r} is invalid: "
                "use alphanumeric characters only; rule type must be Lifecycle.",
            )
    st.policies[name] = {
        "id": f"{account['id']}/managementPolicies/default",
        "name": "DefaultManagementPolicy",
        "type": "Microsoft.Storage/storageAccounts/managementPolicies",
        "properties": {"lastModifiedTime": _now(), "policy": {"rules": rules}},
    }
    st.writes += 1
    return h._send(200, st.policies[name])


# ---- managed identities and role assignments ---------------------------------------------------
def _identity(h: Any, st: StorageState, method: str, sub: str, rg: str, name: str, body: dict[str, Any]) -> None:
    key = (rg.lower(), name.lower())
    if method == "GET":
        if key not in st.identities:
            return h._error(
                404,
                "ResourceNotFound",
                f"The Resource 'Microsoft.ManagedIdentity/userAssignedIdentities/"
                f"{name}' under resource group '{rg}' was not found.",
            )
        return h._send(200, st.identities[key])
    if method != "PUT":
        return h._error(405, "MethodNotAllowed", method)
    old = st.identities.get(key)
    ids = (old or {}).get("properties") or {
        "tenantId": TENANT,
        "principalId": str(uuid.uuid4()),
        "clientId": str(uuid.uuid4()),
    }
    st.identities[key] = {
        "id": f"/subscriptions/{sub}/resourcegroups/{rg}/providers/Microsoft.ManagedIdentity/"
        f"userAssignedIdentities/{name}",
        "name": name,
        "type": "Microsoft.ManagedIdentity/userAssignedIdentities",
        "location": body.get("location", ""),
        "tags": body.get("tags") or {},
        "properties": ids,
    }
    st.writes += 1
    return h._send(200 if old else 201, st.identities[key])


def _scope_exists(h: Any, st: StorageState, scope: list[str]) -> bool:
    """Whether the (lowercased) scope path after the subscription names something the fake holds."""
    if not scope:
        return True
    if scope[0] != "resourcegroups" or len(scope) < 2 or scope[1] not in h.st.groups:
        return False
    if len(scope) == 2:
        return True
    if scope[2:5] == ["providers", "microsoft.storage", "storageaccounts"] and len(scope) >= 6:
        account = st.accounts.get(scope[5])
        if account is None or account["_rg"] != scope[1]:
            return False
        if len(scope) == 6:
            return True
        return (
            scope[6:9] == ["blobservices", "default", "containers"]
            and len(scope) == 10
            and (scope[5], scope[9]) in st.containers
        )
    return False


def _role(
    h: Any, st: StorageState, method: str, sub: str, orig: list[str], rest: list[str], at: int, body: dict[str, Any]
) -> None:
    if len(rest) != at + 4:
        return h._error(404, "InvalidResourceType", f"no route {h.path}")
    name = orig[at + 3]
    scope = f"/subscriptions/{sub}/" + "/".join(orig[:at]) if at else f"/subscriptions/{sub}"
    rid = f"{scope}/providers/Microsoft.Authorization/roleAssignments/{name}"
    if method == "GET":
        found = st.assignments.get(rid.lower())
        if found is None:
            return h._error(404, "RoleAssignmentNotFound", f"The role assignment '{name}' is not found.")
        return h._send(200, found)
    if method != "PUT":
        return h._error(405, "MethodNotAllowed", method)
    if not GUID.match(name):
        return h._error(
            400,
            "InvalidRoleAssignmentId",
            f"The role assignment ID '{name}' is not valid. The role assignment ID must be a GUID.",
        )
    if not _scope_exists(h, st, rest[:at]):
        return h._error(404, "ResourceNotFound", f"The scope '{scope}' does not exist.")
    props = body.get("properties") or {}
    role = str(props.get("roleDefinitionId", ""))
    if role.rsplit("/", 1)[-1].lower() not in ROLES:
        return h._error(
            400, "RoleDefinitionDoesNotExist", f"The specified role definition with ID '{role}' does not exist."
        )
    principal = str(props.get("principalId", ""))
    known = {i["properties"]["principalId"] for i in st.identities.values()}
    if principal not in known or not props.get("principalType"):  # a new principal: not replicated yet
        return h._error(
            400,
            "PrincipalNotFound",
            f"Principal {principal.replace('-', '')} does not exist in the "
            f"directory {TENANT}. Check that you have the correct principal ID.",
        )
    same = next(
        (
            a
            for a in st.assignments.values()
            if a["properties"]["scope"].lower() == scope.lower()
            and a["properties"]["principalId"] == principal
            and a["properties"]["roleDefinitionId"].lower() == role.lower()
        ),
        None,
    )
    if same is not None:
        return h._error(409, "RoleAssignmentExists", "The role assignment already exists.")
    st.assignments[rid.lower()] = {
        "id": rid,
        "name": name,
        "type": "Microsoft.Authorization/roleAssignments",
        "properties": {
            "roleDefinitionId": role,
            "principalId": principal,
            "principalType": props.get("principalType", "ServicePrincipal"),
            "scope": scope,
            "condition": None,
            "createdOn": _now(),
            "updatedOn": _now(),
        },
    }
    st.writes += 1
    return h._send(201, st.assignments[rid.lower()])


def vm_identity(st: StorageState, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A VM body's ``identity`` as ARM returns it (principal and client ids filled in), and "" or
    the message of the ``FailedIdentityOperation`` ARM answers for an identity that does not exist."""
    ident = body.get("identity")
    if not ident:
        return None, ""
    known = {i["id"].lower(): i for i in st.identities.values()}
    out = {}
    for rid in ident.get("userAssignedIdentities") or {}:
        found = known.get(rid.lower())
        if found is None:
            return None, (
                f"Identity operation for resource failed with error 'Failed to perform resource identity "
                f"operation. Status: 'NotFound'. Response: Resource '{rid}' does not exist.'"
            )
        out[rid] = {"principalId": found["properties"]["principalId"], "clientId": found["properties"]["clientId"]}
    return {"type": ident.get("type", "UserAssigned"), "userAssignedIdentities": out}, ""


# ---- control -----------------------------------------------------------------------------------
def control(h: Any, path: list[str], body: dict[str, Any]) -> None:
    st: StorageState = h.st.storage
    what = path[0] if path else "state"
    if what == "taken":
        st.taken.update(str(n) for n in body.get("names") or [])
        return h._send(200, {"ok": True})
    if what == "state":
        return h._send(200, st.view())
    return h._error(404, "NotFound", f"no storage control {what}")
