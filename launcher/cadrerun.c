/* Placeholder until the launcher lands: the tree must build at every commit. */
#include <stdio.h>
int main(void)
{
    fprintf(stderr, "cadrerun: not built yet\n");
    return 1;
}
