/* SPDX-License-Identifier: Apache-2.0 */
/* metadata.managedFields as the API server keeps them on a create or an
 * update (k8s.io/apimachinery's fieldmanager): one entry per manager and
 * operation, {"manager", "operation": "Update", "apiVersion", "time",
 * "fieldsType": "FieldsV1", "fieldsV1"}, the writer's entry made or
 * renewed, the others' kept (the real server drops an entry only when
 * its manager owns no field any more; every writer here rewrites the
 * spec, so the others keep their metadata fields). The manager is the
 * fieldManager query parameter, at most 128 characters, else the User-
 * Agent's product, as the server derives it. What the client sends in
 * managedFields is ignored, as the server ignores an update's. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fakeapi_http.h"

#define FIELD_MANAGER_MAX 128

const char *fa_managed_fields(cJSON *obj, const cJSON *prev, const char *query,
                              const char *user_agent) {
        char *fm = fa_query_get(query, "fieldManager");
        char manager[FIELD_MANAGER_MAX + 1], stamp[32];
        cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata"), *mf, *e, *entry;
        const cJSON *old = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(prev, "metadata"), "managedFields");
        time_t now = time(NULL);
        struct tm tm;

        if (fm && strlen(fm) > FIELD_MANAGER_MAX) {
                free(fm);
                return "fieldManager: Invalid value: must be at most 128 characters";
        }
        if (fm)
                snprintf(manager, sizeof(manager), "%s", fm);
        else
                snprintf(manager, sizeof(manager), "%.*s",
                         user_agent ? (int)strcspn(user_agent, "/") : 7,
                         user_agent ? user_agent : "unknown");
        free(fm);
        gmtime_r(&now, &tm);
        strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
        cJSON_DeleteItemFromObjectCaseSensitive(md, "managedFields");
        mf = cJSON_AddArrayToObject(md, "managedFields");
        MUST(mf);
        cJSON_ArrayForEach(e, old) {
                const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "manager");
                if (cJSON_IsString(m) && strcmp(m->valuestring, manager) != 0)
                        cJSON_AddItemToArray(mf, cJSON_Duplicate(e, true));
        }
        entry = cJSON_CreateObject();
        MUST(entry);
        cJSON_AddStringToObject(entry, "manager", manager);
        cJSON_AddStringToObject(entry, "operation", "Update");
        cJSON_AddStringToObject(entry, "apiVersion", "resource.k8s.io/v1");
        cJSON_AddStringToObject(entry, "time", stamp);
        cJSON_AddStringToObject(entry, "fieldsType", "FieldsV1");
        cJSON_AddItemToObject(entry, "fieldsV1", cJSON_CreateObject());
        cJSON_AddItemToArray(mf, entry);
        return NULL;
}
